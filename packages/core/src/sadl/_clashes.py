"""The rule for a name two plugins register, whatever the order they are discovered in.

A plugin's record claims its name, and an op the NumPy functions it implements, a format its
suffixes. A claim sadl-core's built-in holds stays the built-in's; a claim several plugins make
goes to the one ``SADL_PREFER`` names (``NAME:PLUGIN``, or ``PLUGIN`` for all its claims), and
otherwise to none of them. A record that loses a claim is not served, and using its name raises
the :class:`PluginConflictError` made here, naming every provider and how to choose; the host
serves everything else of the plugins involved.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any

from sadl._errors import PluginConflictError, SadlPluginWarning

__all__ = ["claims_of", "settle", "warn"]

Claim = tuple[str, Any]  # (kind, name), ("numpy", function) or ("suffix", ".ext")
Offer = tuple[Any, str, Any]  # (PluginInfo, kind, record)
Lost = dict[tuple[str, str, str], PluginConflictError]  # (plugin name, kind, name) -> why
Records = dict[str, list[Any]]  # kind -> records
Offers = list[tuple[Any, Records]]  # (PluginInfo, what it offers) for every loaded plugin
Held = dict[Claim, Offer]  # the claims already served
Labels = dict[str, str]  # kind -> one record's name in messages ("ops": "op")
Prefer = dict[str, set[str]]  # SADL_PREFER: name -> plugins (a lone PLUGIN under "")


def claims_of(kind: str, record: Any) -> list[Claim]:
    """What serving ``record`` takes: its name, and the NumPy functions or suffixes it claims."""
    claims: list[Claim] = [(kind, record.name)]
    if kind == "ops":
        claims += [("numpy", func) for func in record.numpy_funcs]
    elif kind == "formats":
        claims += [("suffix", suffix.lower()) for suffix in record.suffixes]
    return claims


def _key(claim: Claim) -> str:
    """How ``SADL_PREFER`` and the messages write a claim: ``Linear``, ``np.tanh``, ``.npz``."""
    kind, what = claim
    return f"np.{getattr(what, '__name__', what)}" if kind == "numpy" else str(what)


def _message(claim: Claim, offered: list[Offer], core: Offer | None, labels: Labels) -> str:
    """Why a claim is lost: ``core`` holds it, or (None) several plugins contest it.

    ``labels`` names one record of each kind (``"ops"``: ``"op"``, ``"commands"``: ``"command"``).
    """
    kind, key = claim[0], _key(claim)
    named = kind not in ("numpy", "suffix")  # a name, not a NumPy function or a suffix
    whose = ", ".join(
        i.label if named else f"{labels[k]} {r.name!r} of plugin {i.label}" for i, k, r in offered
    )
    verb = {"numpy": "implemented", "suffix": "claimed"}.get(kind, "registered")
    what = f"the {labels[kind]} {key!r}" if named else key
    if core is None:
        names = [entry[0].name for entry in offered]
        return (
            f"{what} is {verb} by {len(offered)} plugins: {whose}; "
            f"{'neither' if len(offered) == 2 else 'none'} is served (everything else of theirs "
            f"works) until you choose one: SADL_PREFER={key}:{names[0]}, say, or block the "
            f"others (SADL_DISABLE_PLUGINS={','.join(names[1:])})"
        )
    if named:
        plugins = "plugin" if len(offered) == 1 else "plugins"
        head = f"{what} is sadl-core's built-in; {plugins} {whose} has it too"
    else:
        head = f"{key} is {verb} by sadl-core's built-in {labels[core[1]]} {core[2].name!r}; "
        head += f"{whose} claims it too"
    return (
        f"{head}: the built-in is kept and the plugin's {labels[offered[0][1]]} is not "
        "served (a built-in cannot be replaced; rename it in the plugin)"
    )


_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep  # sadl's, not sadl_layers/ and such


def warn(message: str) -> None:
    """A ``SadlPluginWarning`` that points at the user's line, not at sadl's."""
    here = (_HERE, contextlib.__file__)
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame = frame.f_back
        level += 1
    warnings.warn(message, SadlPluginWarning, stacklevel=level)


def _preferences() -> Prefer:
    """``SADL_PREFER=NAME:PLUGIN,...``: NAME -> plugins; ``PLUGIN`` alone is stored under ``''``."""
    prefer: Prefer = {}
    for entry in os.environ.get("SADL_PREFER", "").split(","):
        key, _, plugin = entry.strip().rpartition(":")
        if plugin:
            prefer.setdefault(key.strip(), set()).add(plugin.strip())
    return prefer


def settle(core: Held, offers: Offers, labels: Labels) -> Lost:
    """``(plugin name, kind, name) -> why`` for every offered record that is not served.

    ``core`` holds the claims already served (the built-ins'); ``offers`` is ``(plugin, kind ->
    records)`` for every loaded plugin. Each claim nobody settles (no built-in, no
    ``SADL_PREFER``) is warned about once.
    """
    claims: dict[Claim, list[Offer]] = {}
    for info, collected in offers:
        for kind, records in collected.items():
            for record in records:
                for claim in claims_of(kind, record):
                    claims.setdefault(claim, []).append((info, kind, record))
    prefer = _preferences()
    _check_preferences(prefer, claims, core, offers)
    lost: Lost = {}
    for claim, offered in claims.items():
        if claim not in core and len(offered) == 1:
            continue  # uncontested
        error = PluginConflictError(_message(claim, offered, core.get(claim), labels))
        # A built-in keeps its claim; otherwise the one plugin SADL_PREFER names wins.
        chosen = set() if claim in core else prefer.get(_key(claim)) or prefer.get("", set())
        winners = [entry for entry in offered if entry[0].name in chosen]
        losers = [entry for entry in offered if winners != [entry]]
        if losers == offered:
            warn(str(error))
        for info, kind, record in losers:
            lost.setdefault((info.name, kind, record.name), error)
    return lost


def _check_preferences(
    prefer: Prefer, claims: dict[Claim, list[Offer]], core: Held, offers: Offers
) -> None:
    """Warn about each ``SADL_PREFER`` entry that chooses nothing: it names a built-in, its
    plugin is not loaded or does not provide the name, or no plugin registers it (a name is
    looked for among the records, then, if the command line settles them, among the commands).
    """
    # settle() runs once for the records (at discovery) and, when the command line first needs
    # them, once more for the commands alone. Each entry is judged in the one pass that knows
    # the answer, so that it is warned about once.
    commands_pass = any("commands" in collected for _, collected in offers)
    providers: dict[str, set[str]] = {"": {info.name for info, _ in offers}}  # "" = PLUGIN alone
    for claim, offered in claims.items():
        providers.setdefault(_key(claim), set()).update(info.name for info, _, _ in offered)
    # Names that exist though no plugin offers them in this pass: set aside by a clash, or
    # already served (the built-ins; in the commands pass, every record too).
    registered = {_key(claim) for claim in core}
    registered.update(n for info, _ in offers for names in info.set_aside.values() for n in names)
    builtin = {
        _key(c) for c, e in core.items() if e[0].builtin and (c[0] == "commands") == commands_pass
    }
    for key, plugin in sorted((key, p) for key, chosen in prefer.items() for p in chosen):
        offered_by = providers.get(key, set())
        if key in builtin:
            why = f"{key!r} is sadl-core's built-in, which no plugin can replace"
        elif plugin in offered_by or (commands_pass and not key):
            continue  # it chooses (a lone PLUGIN: every plugin was judged in the records pass)
        elif offered_by or not key:
            what = f"{key!r} is provided by" if key else "the loaded plugins are"
            why = f"{what} {', '.join(sorted(offered_by)) or 'none'}, not {plugin!r}"
        elif key in registered or key.startswith(("np.", ".")) == commands_pass:
            # Only records claim ``np.NAME`` and ``.suffix``, so the records pass knows whether
            # anything does; any other name may be a command, known only in the commands pass.
            continue
        else:
            why = f"no plugin registers {key!r}"
        entry = f"{key}:{plugin}" if key else plugin
        warn(f"SADL_PREFER entry {entry!r} chooses nothing: {why}")
