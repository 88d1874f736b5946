"""Plugin discovery and the registries: who provides which op, layer, optimizer, model, format.

Discovery is lazy (the first registry use, never ``import sadl``), isolated and attributed: each
plugin is imported, registered and asked for its records on its own, so one broken plugin is
recorded (status ``error`` / ``incompatible``) and warned about once while everything else works.
``SADL_PLUGINS_STRICT=1`` turns every such problem into an exception; ``SADL_DISABLE_PLUGINS=a,b``
blocks plugins by entry-point name. Core's own records and commands come through the same hooks,
from built-in plugins imported by name (``BUILTIN_PLUGINS``, as pytest loads its own), which
cannot be blocked.

A name two plugins register (or a NumPy function two ops implement, a suffix two formats claim)
is settled by one rule, whatever the discovery order: core's built-in keeps its own; otherwise
the plugin that ``SADL_PREFER=NAME:PLUGIN`` (or ``SADL_PREFER=PLUGIN``) names serves it; otherwise
nobody does, and using the name raises :class:`PluginConflictError` naming every provider. Only
the contested records are set aside: both plugins get status ``conflict`` and serve the rest.
A conflict is not a failure to load, so ``SADL_PLUGINS_STRICT=1`` leaves it as it is (a warning
at discovery; the contested name raises wherever it is used).

Discovery runs once, under a lock: other threads wait, and only a fully loaded registry is ever
published. The host hands the array layer itself (``sadl.backends.install_plugin_loader``): the
array layer reads its device backends there (again after a reload, when ``generation`` changed),
triggers discovery when it meets a device type it does not know yet, and the NumPy dispatch
reads its op table there.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import importlib.metadata as metadata
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from sadl import _hookspecs, backends
from sadl._clashes import DECLARED_LABELS, NAME_KINDS, claims_of, hook_of, name_of, settle
from sadl._errors import (
    IncompatiblePluginError,
    PluginConflictError,
    PluginError,
    SadlPluginWarning,
    UnknownNameError,
)
from sadl._hookspecs import KINDS, RecordKind
from sadl._known import KNOWN_COMMANDS, install_command, known_provider
from sadl._version import __version__

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "Registry",
    "registry",
    "reload_plugins",
]

ENTRY_POINT_GROUP = "sadl.plugins"

#: Core's own plugins, imported by name: (plugin name, module). ``sadl`` registers the ops and
#: optimizers, ``sadl.cli`` the core subcommands of the ``sadl`` command line.
BUILTIN_PLUGINS = (("sadl", "sadl._builtin"), ("sadl.cli", "sadl._commands"))


@dataclass
class PluginInfo:
    """One plugin as discovered: where it comes from, whether it loaded, what it provides."""

    name: str
    distribution: str
    version: str
    status: str = "ok"  # ok | conflict | blocked | error | incompatible
    error: str = ""
    builtin: bool = False
    provides: dict[str, list[str]] = field(default_factory=dict)
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # by hook: names not served
    #: kind -> name -> (this plugin's record that lost a clash, why): what ``check-plugins`` checks
    set_aside: dict[str, dict[str, tuple[Any, PluginConflictError]]] = field(default_factory=dict)
    module: ModuleType | None = None

    @property
    def label(self) -> str:
        """``name (distribution version)``, for messages."""
        return f"{self.name!r} ({self.distribution} {self.version})"

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape printed by ``sadl plugins --json``."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
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
        self.pluginmanager = _new_pluginmanager()
        self._commands_settled = False  # see settle_commands
        self.kinds: dict[str, RecordKind] = dict(KINDS)  # and those plugins declare
        self._records: dict[str, dict[str, Any]] = {kind: {} for kind in NAME_KINDS}
        self._providers: dict[str, dict[str, PluginInfo]] = {kind: {} for kind in NAME_KINDS}
        #: kind -> name -> (the record set aside, why): records that lost a clash
        self._unserved: dict[str, dict[str, tuple[Any, PluginConflictError]]] = {
            kind: {} for kind in NAME_KINDS
        }
        self._contested_funcs: dict[Any, PluginConflictError] = {}

    def _add_kind(self, spec: RecordKind) -> None:
        """A record kind a plugin declared (``records_hookspec``) joins this registry's."""
        self.kinds[spec.kind] = spec
        DECLARED_LABELS[spec.kind] = spec.label
        for table in (self._records, self._providers, self._unserved):
            table.setdefault(spec.kind, {})

    # ------------------------------------------------------------------ queries
    def records(self, kind: str) -> dict[str, Any]:
        """Name -> record for a kind (ops, layers, optimizers, models, formats)."""
        return self._records[kind]

    def provider(self, kind: str, name: str) -> PluginInfo | None:
        """The plugin that registered ``name``."""
        if kind == "commands":
            self.settle_commands()
        return self._providers[kind].get(name)

    def conflict(self, kind: str, name: str) -> PluginConflictError | None:
        """Why a plugin's ``name`` is set aside (it lost a clash), or None."""
        found = self.unserved(kind).get(name)
        return None if found is None or name in self._records[kind] else found[1]

    def unserved(self, kind: str) -> dict[str, tuple[Any, PluginConflictError]]:
        """Name -> (record, why) for every record of ``kind`` set aside by a clash."""
        if kind == "commands":
            self.settle_commands()
        return self._unserved[kind]

    def lookup(self, kind: str, name: str) -> Any:
        """The record called ``name``; a missing or contested name raises with a useful hint."""
        found = self._records[kind].get(name)
        if found is not None:
            return found
        conflict = self.conflict(kind, name)
        if conflict is not None:
            raise conflict
        raise UnknownNameError(
            f"no {self.kinds[kind].label} named {name!r} is registered{self.hint(kind, name)}"
        )

    def hint(self, kind: str, name: str) -> str:
        """Where ``name`` would come from and how to get it, or which plugins failed to load."""
        known = known_provider(kind, name)
        if known is not None:
            distribution, exact = known
            if exact != name and exact in self._records[kind]:
                return f"; did you mean {exact!r}? (names are case-sensitive)"
            return "; " + self.provider_status(distribution, exact, kind)
        same = [n for n in self._records[kind] if n.casefold() == name.casefold()]
        if same:
            return f"; did you mean {same[0]!r}? (names are case-sensitive)"
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
        if info.status == "blocked":
            blocked = os.environ.get("SADL_DISABLE_PLUGINS", "")
            return (
                f"{what}, whose plugin {info.name!r} is blocked by "
                f"SADL_DISABLE_PLUGINS={blocked} (remove {info.name!r} from it)"
            )
        if info.status not in ("ok", "conflict"):
            return (
                f"{what}, which failed to load ({info.status}): {info.error} "
                "(`sadl plugins` shows every plugin's status)"
            )
        if kind is not None:
            for other, spec in self.kinds.items():
                if other != kind and name in self._records[other]:
                    return f"{what} as a {spec.label}, not as a {self.kinds[kind].label}"
        return f"{what} {info.version}, which is installed and loaded but does not register it"

    def command_hint(self, command: str) -> str:
        """Why the subcommand ``command`` is missing (empty when no known package provides it)."""
        distribution = KNOWN_COMMANDS.get(command)
        if distribution is None:
            return ""
        what = f"'sadl {command}' is a command of {distribution}"
        return self.provider_status(distribution, command, what=what)

    # ------------------------------------------------------------------ loading
    def load(self, entry_points: Iterable[Any] | None = None) -> None:
        """Discover the built-in plugins and every entry point, each in isolation.

        Anything a plugin prints while it is imported or registers goes to stderr, so the
        ``sadl plugins --json`` output stays machine-readable.
        """
        with contextlib.redirect_stdout(sys.stderr):
            self._load(entry_points)
        self.generation += 1

    def _load(self, entry_points: Iterable[Any] | None) -> None:
        strict = os.environ.get("SADL_PLUGINS_STRICT", "") not in ("", "0")
        blocked = {
            n.strip() for n in os.environ.get("SADL_DISABLE_PLUGINS", "").split(",") if n.strip()
        }
        pm = self.pluginmanager
        for name, module_name in BUILTIN_PLUGINS:
            module = importlib.import_module(module_name)
            core = PluginInfo(name, "sadl-core", __version__, builtin=True, module=module)
            pm.register(module, name=name)
            self.plugins.append(core)
            # Core's records go in first, so plugin code may use any core op while it is imported.
            self._commit(core, self._collect(core))
        loaded = []

        eps = sorted(
            _entry_points() if entry_points is None else entry_points, key=lambda ep: ep.name
        )
        for ep in eps:
            info = PluginInfo(ep.name, *_distribution(ep))
            self.plugins.append(info)
            if ep.name in blocked:
                info.status = "blocked"
                continue
            try:
                module = ep.load()
                pm.register(module, name=ep.name)
            except IncompatiblePluginError as exc:
                self._fail(info, "incompatible", str(exc), exc, strict)
                continue
            except (Exception, SystemExit) as exc:
                self._fail(info, "error", _describe(exc), exc, strict)
                continue
            info.module = module
            loaded.append(info)

        pm.hook.add_hookspecs.call_historic(kwargs={"pluginmanager": pm})
        for name in _hook_names(pm):  # record kinds that plugins declared (records_hookspec)
            spec = getattr(getattr(pm.hook, name).spec.function, "sadl_records", None)
            if isinstance(spec, RecordKind):
                self._add_kind(spec)
        offers = []
        for info in loaded:
            try:
                self._check_hook_names(info)
                offers.append((info, self._collect(info)))
            except (Exception, SystemExit) as exc:
                self._fail(info, "error", _describe(exc), exc, strict)
        self._settle(offers)

    def _fail(
        self, info: PluginInfo, status: str, message: str, exc: BaseException, strict: bool
    ) -> None:
        info.status = status
        info.error = message
        if info.module is not None:
            self.pluginmanager.unregister(info.module)
            info.module = None
        if strict:
            if isinstance(exc, PluginError):
                raise exc
            raise PluginError(f"sadl plugin {info.label} failed to load: {message}") from exc
        short = " ".join(message.split(" (at ")[0].split())
        warnings.warn(
            f"sadl plugin {info.label} failed to load ({status}): {short}; everything else works "
            "(`sadl plugins` has the details; SADL_PLUGINS_STRICT=1 makes this an error)",
            SadlPluginWarning,
            stacklevel=_first_frame_outside_sadl(),
        )

    def _check_hook_names(self, info: PluginInfo) -> None:
        """Report hook implementations that match no hook (a misspelled name does nothing)."""
        pm = self.pluginmanager
        module = info.module
        known = _hook_names(pm)
        for caller in pm.get_hookcallers(module) or []:
            if caller.spec is None:
                close = difflib.get_close_matches(caller.name, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise PluginError(
                    f"plugin {info.label} implements unknown hook {caller.name!r}{hint} "
                    f"(known hooks: {', '.join(sorted(known))})"
                )
        marker = f"{pm.project_name}_impl"
        for attr in dir(module):
            value = getattr(module, attr, None)
            if attr in known and callable(value) and not hasattr(value, marker):
                raise PluginError(
                    f"plugin {info.label} defines {attr}() without @hookimpl, so sadl would never "
                    "call it; decorate it with sadl.plugins.hookimpl"
                )

    def _collect(self, info: PluginInfo) -> dict[str, list[Any]]:
        """Call this plugin's ``register_*`` hooks and validate what they return."""
        collected: dict[str, list[Any]] = {}
        for kind, spec in self.kinds.items():
            hook_name = spec.hook
            records: list[Any] = []
            for impl in getattr(self.pluginmanager.hook, hook_name).get_hookimpls():
                if impl.plugin is not info.module:
                    continue
                result = impl.function()
                if result is None:
                    continue
                if isinstance(result, str | bytes) or not isinstance(result, Iterable):
                    raise PluginError(
                        f"{hook_name}() of plugin {info.label} must return an iterable of "
                        f"{spec.record_type.__name__} records, got {type(result).__name__}"
                    )
                for record in result:
                    if not isinstance(record, spec.record_type):
                        raise PluginError(
                            f"{hook_name}() of plugin {info.label} returned "
                            f"{type(record).__name__} {record!r}; expected "
                            f"{spec.record_type.__name__}"
                        )
                    records.append(record)
            seen: set[str] = set()
            for record in records:
                if record.name in seen:
                    raise PluginError(
                        f"plugin {info.label} registers the {spec.label} {record.name!r} twice"
                    )
                seen.add(record.name)
            collected[kind] = records
        return collected

    def settle_commands(self) -> None:
        """Settle the clashes of subcommands, once, when first needed (the command line, a
        listing): it runs every plugin's ``register_commands``, which library use never needs.
        """
        with _lock:
            if self._commands_settled:
                return
            self._commands_settled = True
            loaded = [p for p in self.plugins if p.module is not None]
            with contextlib.redirect_stdout(sys.stderr):
                for core in (p for p in loaded if p.builtin):
                    self._commit(core, {"commands": self._command_names(core)})
                self._settle(
                    [(p, {"commands": self._command_names(p)}) for p in loaded if not p.builtin]
                )

    def _command_names(self, info: PluginInfo) -> list[str]:
        """The subcommands (aliases included) the plugin's ``register_commands`` adds."""
        sub = argparse.ArgumentParser(add_help=False).add_subparsers()
        for impl in self.pluginmanager.hook.register_commands.get_hookimpls():
            if impl.plugin is info.module:
                # A failure is reported where the command line is built (``sadl: warning:``).
                with contextlib.suppress(Exception, SystemExit):
                    impl.function(subparsers=sub)
        return list(sub.choices)

    def _settle(self, offers: list[tuple[PluginInfo, dict[str, list[Any]]]]) -> None:
        """Commit every plugin's records but those that lost a clash (the rule above)."""
        core = {
            claim: (self._providers[kind][name], kind, record)
            for kind, records in self._records.items()
            for name, record in records.items()
            for claim in claims_of(kind, record)
        }
        lost = settle(core, offers, _first_frame_outside_sadl)
        for info, collected in offers:
            served: dict[str, list[Any]] = {}
            for kind, records in collected.items():
                served[kind] = []
                for record in records:
                    why = lost.get((id(info), kind, name_of(record)))
                    if why is None:
                        served[kind].append(record)
                        continue
                    self._unserved[kind][name_of(record)] = (record, why)
                    info.set_aside.setdefault(kind, {})[name_of(record)] = (record, why)
                    info.conflicts.setdefault(hook_of(kind), []).append(name_of(record))
                    if str(why) not in info.error:
                        info.status, info.error = "conflict", f"{info.error}\n{why}".strip()
            self._commit(info, served, provides=collected)
        served_funcs = {f for op in self._records["ops"].values() for f in op.numpy_funcs}
        for op, why in self._unserved["ops"].values():
            for func in op.numpy_funcs:
                if func not in served_funcs:
                    self._contested_funcs.setdefault(func, why)

    def contested_function(self, func: Any) -> PluginConflictError | None:
        """Why no op serves the NumPy callable ``func`` though a plugin's op claims it, or None."""
        return self._contested_funcs.get(func)

    def _commit(
        self,
        info: PluginInfo,
        collected: dict[str, list[Any]],
        provides: dict[str, list[Any]] | None = None,
    ) -> None:
        for kind, records in (provides or collected).items():
            info.provides[hook_of(kind)] = [name_of(r) for r in records]
        for kind, records in collected.items():
            for record in records:
                self._records[kind][name_of(record)] = record
                self._providers[kind][name_of(record)] = info

    def command_impls(self) -> list[tuple[PluginInfo, Any]]:
        """``(plugin, register_commands implementation)`` for every loaded plugin."""
        self.settle_commands()
        by_module = {id(p.module): p for p in self.plugins if p.module is not None}
        return [
            (by_module[id(impl.plugin)], impl.function)
            for impl in self.pluginmanager.hook.register_commands.get_hookimpls()
            if id(impl.plugin) in by_module
            and by_module[id(impl.plugin)].status in ("ok", "conflict")
        ]


def _new_pluginmanager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("sadl")
    pm.add_hookspecs(_hookspecs)
    return pm


def _hook_names(pm: pluggy.PluginManager) -> list[str]:
    return [
        name
        for name in dir(pm.hook)
        if not name.startswith("_") and getattr(getattr(pm.hook, name), "spec", None) is not None
    ]


def _entry_points() -> list[Any]:
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def _distribution(ep: Any) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ("(unknown)", "?")
    return (dist.metadata["Name"] or "(unknown)", dist.version or "?")


def _first_frame_outside_sadl() -> int:
    """The ``stacklevel`` that makes a warning point at the user's line, not at sadl's."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # not sadl_layers/ and the like
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame = frame.f_back
        level += 1
    return level


def _describe(exc: BaseException) -> str:
    """``Type: message (at file:line)``, the line in the plugin's code where it failed."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep  # not sadl_layers/ and the like
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith((here, "<frozen "))  # sadl's own and the import system's
    ]
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
    global _registry
    found = _registry
    if found is not None:
        return found
    with _lock:
        if _registry is None:
            if _loading is not None:
                return _loading
            _registry = _build(None, generation=0)
        assert _registry is not None
        return _registry


def reload_plugins(entry_points: Iterable[Any] | None = None) -> Registry:
    """Forget every plugin and discover again (after changing the environment variables).

    ``entry_points`` replaces the installed entry points (tests use this to load fixtures).
    """
    global _registry
    with _lock:
        old = _registry
        _registry = _build(entry_points, generation=old.generation + 1 if old is not None else 0)
        return _registry


def _build(entry_points: Iterable[Any] | None, generation: int) -> Registry:
    global _loading
    reg = Registry()
    reg.generation = generation
    _loading = reg
    try:
        reg.load(entry_points)
    finally:
        _loading = None
    return reg


backends.install_plugin_loader(registry)
