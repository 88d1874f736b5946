"""Plugin discovery and the registries: who provides which op, layer, optimizer, model, format.

Built on pluggy's own machinery: each entry point is loaded and registered on its own (so one
broken plugin is recorded, status ``error`` / ``incompatible``, and warned about once while
everything else works), ``SADL_DISABLE_PLUGINS=a,b`` is ``PluginManager.set_blocked``, a
misspelled hook is found by ``check_pending``, ``add_hookspecs`` is a historic hook, the record
kinds are read from the hook specifications (``records_hookspec``, core's and plugins' alike),
and every ``register_*`` hook is called as a pluggy hook of one plugin, by the plugin's name
(``subset_hook_caller`` over ``list_name_plugin``), so each record is attributed to the plugin
that returned it and one plugin's failing hook fails that plugin alone.
``SADL_PLUGINS_STRICT=1`` turns a load failure into an exception. Core's own records and
commands come through the same hooks, from built-in plugins imported by name
(``BUILTIN_PLUGINS``, as pytest loads its own), which cannot be blocked.

Not used, and why: ``load_setuptools_entrypoints`` loads the whole group in one call, so the
first failing plugin stops the rest; called once per name instead it rescans every installed
distribution each time (about 17 ms a plugin here, 170 ms more at discovery for ten), and
``list_plugin_distinfo``, which it fills, lists only what loaded, while ``sadl plugins`` names
the distribution of blocked and failed plugins too (read from each entry point's ``dist``). One
call of ``pm.hook.register_ops()`` for all plugins cannot attribute records (a plugin returning
nothing leaves no trace in the result list), and its first exception would abort every other
plugin's registration.

A name two plugins register is settled by one rule, whatever the discovery order
(``sadl._clashes``): only the contested records are set aside; both plugins get status
``conflict`` and serve the rest. Strict mode leaves a conflict as it is.

Discovery is lazy (the first registry use, never ``import sadl``) and runs once, under a lock:
other threads wait, and only a fully loaded registry is published. The array layer reads its
device backends and the NumPy dispatch its op table here (``backends.install_plugin_loader``).
Subcommands are settled only when the command line or a listing needs them, since that runs
every plugin's ``register_commands``, which library use never needs: each plugin adds its
commands to subparsers of its own, and the :class:`Command` records made from them are settled
like any record.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.metadata as metadata
import os
import sys
import threading
import traceback
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pluggy

from sadl import _hookspecs, backends
from sadl._argparse import ArgumentParser
from sadl._clashes import Lost, Records, claims_of, settle, warn
from sadl._errors import IncompatiblePluginError as Incompatible
from sadl._errors import PluginConflictError, PluginError, UnknownNameError
from sadl._hookspecs import KINDS, RecordKind
from sadl._install import install_command
from sadl._known import known_provider
from sadl._version import __version__

__all__ = ["BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "Command", "PluginInfo", "Registry", "registry"]

ENTRY_POINT_GROUP = "sadl.plugins"
#: Core's own plugins, imported by name: (plugin name, module). ``sadl`` registers the ops,
#: optimizers and backends, ``sadl.cli`` the core subcommands of the ``sadl`` command line.
BUILTIN_PLUGINS = (("sadl", "sadl._builtin"), ("sadl.cli", "sadl._commands"))
LOADED = ("ok", "conflict")  # a plugin in conflict serves everything but its contested names


class Command(NamedTuple):
    """A subcommand a plugin added: its parser and its line of ``sadl --help`` (None: an alias)."""

    name: str
    parser: Any
    line: Any


@dataclass
class PluginInfo:
    """One plugin as discovered: where it comes from, whether it loaded, what it provides."""

    name: str
    distribution: str
    version: str
    status: str = "ok"  # ok | conflict | blocked | error | incompatible
    error: str = ""
    builtin: bool = False
    provides: dict[str, list[str]] = field(default_factory=dict)  # by hook: every name offered
    #: kind -> name -> (this plugin's record that lost a clash, why); nobody serves it from here
    set_aside: dict[str, dict[str, tuple[Any, PluginConflictError]]] = field(default_factory=dict)
    command_error: str = ""  # why its register_commands failed (the command line warns)

    @property
    def label(self) -> str:
        """``name (distribution version)``, for messages."""
        return f"{self.name!r} ({self.distribution} {self.version})"

    @property
    def conflicts(self) -> dict[str, list[str]]:
        """Hook -> the names set aside by a clash."""
        return {f"register_{kind}": list(names) for kind, names in self.set_aside.items()}

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape printed by ``sadl plugins --json``."""
        return {
            **{key: getattr(self, key) for key in ("name", "distribution", "version", "status")},
            "error": self.error or None,
            "builtin": self.builtin,
            "provides": {hook: sorted(names) for hook, names in self.provides.items() if names},
            "conflicts": {hook: sorted(names) for hook, names in self.conflicts.items()},
        }


class Registry:
    """Every record by kind and name, with the plugin that provided it."""

    def __init__(self) -> None:
        self.generation = 0
        self.plugins: list[PluginInfo] = []
        self.pluginmanager = pluggy.PluginManager("sadl")
        self.pluginmanager.add_hookspecs(_hookspecs)
        self.kinds: dict[str, RecordKind] = dict(KINDS)  # and those plugins declare
        # kind -> name -> record and the plugin serving it (those set aside: PluginInfo.set_aside)
        self._records: dict[str, dict[str, Any]] = defaultdict(dict)
        self._providers: dict[str, dict[str, PluginInfo]] = defaultdict(dict)
        self._commands_settled = False  # see settle_commands

    # ------------------------------------------------------------------ queries
    def records(self, kind: str) -> dict[str, Any]:
        """Name -> record for a kind (ops, layers, optimizers, models, formats)."""
        return self._records[kind]

    def provider(self, kind: str, name: str) -> PluginInfo | None:
        """The plugin that registered ``name``."""
        return self._settled(kind)._providers[kind].get(name)

    def conflict(self, kind: str, name: str) -> PluginConflictError | None:
        """Why a plugin's ``name`` is set aside (it lost a clash), or None."""
        found = self.unserved(kind).get(name)
        return None if found is None or name in self._records[kind] else found[1]

    def unserved(self, kind: str) -> dict[str, tuple[Any, PluginConflictError]]:
        """Name -> (record, why) for every record of ``kind`` set aside by a clash."""
        plugins = self._settled(kind).plugins
        return {n: lost for p in plugins for n, lost in p.set_aside.get(kind, {}).items()}

    def _settled(self, kind: str) -> Registry:
        """This registry, with the commands settled first if ``kind`` is ``"commands"``."""
        return self.settle_commands() if kind == "commands" else self

    def contested_function(self, func: Any) -> PluginConflictError | None:
        """Why no op serves the NumPy callable ``func`` though a plugin's op claims it, or None.

        Asked only for a callable no served op implements (NumPy dispatch's fallback).
        """
        unserved = self.unserved("ops").values()
        return next((why for op, why in unserved if func in op.numpy_funcs), None)

    def lookup(self, kind: str, name: str) -> Any:
        """The record called ``name``; a missing or contested name raises with a useful hint."""
        found = self._records[kind].get(name)
        if found is None:
            missing = f"no {self.kinds[kind].label} named {name!r} is registered"
            raise self.conflict(kind, name) or UnknownNameError(missing + self.hint(kind, name))
        return found

    def hint(self, kind: str, name: str) -> str:
        """Where ``name`` would come from and how to get it, or which plugins failed to load."""
        known = known_provider(kind, name)
        if known is not None and (known[1] == name or known[1] not in self._records[kind]):
            return "; " + self.provider_status(known[0], known[1], kind)
        same = (n for n in self._records[kind] if n.casefold() == name.casefold())
        exact = known[1] if known is not None else next(same, None)
        if exact is not None:
            return f"; did you mean {exact!r}? (names are case-sensitive)"
        failed = [p for p in self.plugins if p.status in ("error", "incompatible")]
        if failed:
            names = ", ".join(f"{p.label} [{p.status}]" for p in failed)
            return f"; plugins that failed to load: {names} (`sadl plugins` shows why)"
        close = difflib.get_close_matches(name, list(self._records[kind]), n=3)
        return f"; did you mean {', '.join(close)}?" if close else ""

    def provider_status(
        self, distribution: str, name: str, kind: str | None = None, what: str = ""
    ) -> str:
        """Why ``name``, which ``distribution`` provides, is not available, and what to do.

        ``what`` starts the sentence (default ``'name' is provided by distribution``).
        """
        what = what or f"{name!r} is provided by {distribution}"
        info = next((p for p in self.plugins if p.distribution == distribution), None)
        if info is None:
            return f"{what}, which is not installed: {install_command(distribution)}"
        plugin, blocked = repr(info.name), os.environ.get("SADL_DISABLE_PLUGINS", "")
        if info.status == "blocked":
            blocked = f"SADL_DISABLE_PLUGINS={blocked} (remove {plugin} from it)"
            return f"{what}, whose plugin {plugin} is blocked by {blocked}"
        if info.status not in LOADED:
            see = "(`sadl plugins` shows every plugin's status)"
            return f"{what}, which failed to load ({info.status}): {info.error} {see}"
        for other, spec in self.kinds.items():
            if kind is not None and other != kind and name in self._records[other]:
                return f"{what} as a {spec.label}, not as a {self.kinds[kind].label}"
        return f"{what} {info.version}, which is installed and loaded but does not register it"

    # ------------------------------------------------------------------ loading
    def load(self, entry_points: Iterable[Any] | None = None) -> None:
        """Discover the built-in plugins and every entry point, each in isolation.

        Anything a plugin prints while it is imported or registers goes to stderr, so the
        ``sadl plugins --json`` output stays machine-readable.
        """
        if entry_points is None:
            entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
        with contextlib.redirect_stdout(sys.stderr):
            self._load(entry_points)
        self.generation += 1

    def _load(self, entry_points: Iterable[Any]) -> None:
        pm = self.pluginmanager
        for name, module_name in BUILTIN_PLUGINS:
            pm.register(importlib.import_module(module_name), name=name)
            self.plugins.append(core := PluginInfo(name, "sadl-core", __version__, builtin=True))
            # Core's records go in first, so plugin code may use any core op while it is imported.
            self._commit(core, self._collect(core))
        for name in os.environ.get("SADL_DISABLE_PLUGINS", "").split(","):
            if name.strip() and not pm.has_plugin(name.strip()):  # a built-in cannot be blocked
                pm.set_blocked(name.strip())
        for ep in sorted(entry_points, key=lambda ep: ep.name):
            dist = getattr(ep, "dist", None)  # None: an entry point given by a test
            name, version = (dist.metadata["Name"], dist.version) if dist else ("(unknown)", "?")
            self.plugins.append(info := PluginInfo(ep.name, name or "(unknown)", version or "?"))
            if pm.is_blocked(ep.name):
                info.status = "blocked"
                continue
            with self._isolated(info):
                pm.register(ep.load(), name=ep.name)
        pm.hook.add_hookspecs.call_historic(kwargs={"pluginmanager": pm})
        # The record kinds plugins declared (records_hookspec), after core's own.
        hooks = vars(pm.hook).values()
        new = (getattr(h.spec.function, "sadl_records", 0) for h in hooks if h.spec)
        self.kinds.update({kind.kind: kind for kind in new if isinstance(kind, RecordKind)})
        self._check_hooks()
        offers = []
        for info in self.loaded(builtin=False):
            with self._isolated(info):
                offers.append((info, self._collect(info)))
        self._settle(offers)

    def loaded(self, builtin: bool | None = None) -> list[PluginInfo]:
        """The plugins that loaded (status ok or conflict), built-in ones first."""
        return [p for p in self.plugins if p.status in LOADED and builtin in (None, p.builtin)]

    @contextlib.contextmanager
    def _isolated(self, info: PluginInfo) -> Any:
        """Record whatever the plugin raises as its status (strict mode: raise it)."""
        try:
            yield
        except (Exception, SystemExit) as exc:
            self._fail(info, exc, "" if isinstance(exc, Incompatible) else _describe(exc))

    def _fail(self, info: PluginInfo, exc: BaseException, message: str = "") -> None:
        """Give ``info`` status ``incompatible`` or ``error`` (``message``, default ``exc``'s)."""
        status = "incompatible" if isinstance(exc, Incompatible) else "error"
        info.status, info.error = status, message or str(exc)
        if self.pluginmanager.has_plugin(info.name):
            self.pluginmanager.unregister(name=info.name)
        if os.environ.get("SADL_PLUGINS_STRICT", "") not in ("", "0"):
            if isinstance(exc, PluginError):
                raise exc
            raise PluginError(f"sadl plugin {info.label} failed to load: {info.error}") from exc
        short = " ".join(info.error.split(" (at ")[0].split())
        warn(
            f"sadl plugin {info.label} failed to load ({status}): {short}; everything else works "
            "(`sadl plugins` has the details; SADL_PLUGINS_STRICT=1 makes this an error)"
        )

    def _check_hooks(self) -> None:
        """A hook implementation no hook specifies (``check_pending``), or a function named
        after a hook but not decorated: sadl would never call it, so the plugin is an error.
        """
        pm = self.pluginmanager
        known = sorted(name for name, hook in vars(pm.hook).items() if hook.has_spec())
        while True:
            try:
                pm.check_pending()
                break
            except pluggy.PluginValidationError as e:
                info = next(p for p in self.plugins if p.name == pm.get_name(e.plugin))
                hook = next(c.name for c in pm.get_hookcallers(e.plugin) or () if not c.has_spec())
                close = difflib.get_close_matches(hook, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                why = f"implements unknown hook {hook!r}{hint} (known hooks: {', '.join(known)})"
                self._fail(info, PluginError(f"plugin {info.label} {why}"))
        for info in self.loaded(builtin=False):
            mod = pm.get_plugin(info.name)
            bare = [a for a in known if callable(getattr(mod, a, None))]
            for attr in [a for a in bare if not pm.parse_hookimpl_opts(mod, a)][:1]:
                why = f"defines {attr}() without @hookimpl, so sadl would never call it"
                why += "; decorate it with sadl.plugins.hookimpl"
                self._fail(info, PluginError(f"plugin {info.label} {why}"))

    def call(self, hook: str, plugin: str, **kwargs: Any) -> list[Any]:
        """Call the pluggy hook ``hook`` of the plugin named ``plugin`` alone: its results."""
        pm = self.pluginmanager
        others = [p for name, p in pm.list_name_plugin() if name != plugin]
        return pm.subset_hook_caller(hook, remove_plugins=others)(**kwargs)  # type: ignore[no-any-return]

    def _collect(self, info: PluginInfo) -> Records:
        """Call this plugin's ``register_*`` hooks and validate what they return."""
        collected: Records = {}
        for kind, spec in self.kinds.items():
            records: dict[str, Any] = {}
            hook, expected = f"{spec.hook}() of plugin {info.label}", spec.record_type.__name__
            for result in self.call(spec.hook, info.name):
                if isinstance(result, str | bytes) or not isinstance(result, Iterable):
                    got = f"{expected} records, got {type(result).__name__}"
                    raise PluginError(f"{hook} must return an iterable of {got}")
                for record in result:
                    if not isinstance(record, spec.record_type):
                        got = f"{type(record).__name__} {record!r}"
                        raise PluginError(f"{hook} returned {got}; expected {expected}")
                    if records.setdefault(name := record.name, record) is not record:
                        twice = f"the {spec.label} {name!r} twice"
                        raise PluginError(f"plugin {info.label} registers {twice}")
            collected[kind] = list(records.values())
        return collected

    def settle_commands(self) -> Registry:
        """Run every plugin's ``register_commands`` once, on subparsers of its own, and settle
        the clashes of the subcommands they add (the command line, a listing; never library use).
        """
        with _lock:
            if self._commands_settled:
                return self
            self._commands_settled = True
            offers = []
            with contextlib.redirect_stdout(sys.stderr):
                for info in self.loaded():
                    sub = ArgumentParser(prog="sadl").add_subparsers(parser_class=ArgumentParser)
                    try:
                        self.call("register_commands", info.name, subparsers=sub)
                    except (Exception, SystemExit) as exc:  # the command line warns
                        info.command_error = f"{type(exc).__name__}: {exc}"
                    lines = {line.dest: line for line in sub._choices_actions}
                    made = [Command(n, p, lines.get(n)) for n, p in sub.choices.items()]
                    if info.builtin:  # built-ins come first and are never contested
                        self._commit(info, {"commands": made})
                    else:
                        offers.append((info, {"commands": made}))
            self._settle(offers)
            return self

    def commands(self) -> list[Command]:
        """Every subcommand served, built-in ones first."""
        return list(self.settle_commands()._records["commands"].values())

    def _settle(self, offers: list[tuple[PluginInfo, Records]]) -> None:
        """Commit every plugin's records but those that lost a clash (``sadl._clashes``)."""
        core = {
            claim: (self._providers[kind][name], kind, record)
            for kind, records in self._records.items()
            for name, record in records.items()
            for claim in claims_of(kind, record)
        }
        labels = {"commands": "command", **{kind: spec.label for kind, spec in self.kinds.items()}}
        lost = settle(core, offers, labels)
        for info, collected in offers:
            self._commit(info, collected, lost)

    def _commit(self, info: PluginInfo, collected: Records, lost: Lost | None = None) -> None:
        """Serve ``info``'s records, all but those ``lost`` sets aside (and says why)."""
        for kind, records in collected.items():
            info.provides[f"register_{kind}"] = [r.name for r in records]
            for record in records:
                why = (lost or {}).get((info.name, kind, record.name))
                if why is None:
                    self._records[kind][record.name] = record
                    self._providers[kind][record.name] = info
                    continue
                info.set_aside.setdefault(kind, {})[record.name] = (record, why)
                if str(why) not in info.error:
                    info.status, info.error = "conflict", f"{info.error}\n{why}".strip()


def _describe(exc: BaseException) -> str:
    """``Type: message (at file:line)``, the line in the plugin's code where it failed."""
    sadl = os.path.dirname(os.path.abspath(__file__)) + os.sep  # not sadl_layers/ and such
    skip = (sadl, "<frozen ", os.path.dirname(pluggy.__file__))  # sadl, imports, pluggy
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(skip)]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


_lock = threading.RLock()
_registry: Registry | None = None  # published only once fully loaded
_loading: Registry | None = None  # being loaded, by the thread that holds _lock


def registry() -> Registry:
    """The loaded registry (plugins are discovered on the first call, once, under a lock).

    Other threads wait for discovery to finish; the loading thread itself (a plugin that looks a
    name up while it is imported) sees the registry as loaded so far.
    """
    if _registry is not None:
        return _registry
    with _lock:
        return _registry or _loading or reload_plugins(generation=0)


def reload_plugins(entry_points: Iterable[Any] | None = None, generation: int = -1) -> Registry:
    """Forget every plugin and discover again (after changing the environment variables).

    ``entry_points`` replaces the installed entry points (tests use this to load fixtures).
    """
    global _registry, _loading
    with _lock:
        reg = _loading = Registry()
        reg.generation = generation if generation >= 0 else (_registry or reg).generation + 1
        try:
            reg.load(entry_points)
        finally:
            _loading = None
        _registry = reg
        return reg


backends.install_plugin_loader(registry)
