"""The plugin-author API: ``hookimpl``, the records, ``require_api``, the errors.

A plugin package declares an entry point in the group ``sadl.plugins`` that names a module; in that
module, functions decorated with ``hookimpl`` implement the hooks of ``sadl.plugins.hookspecs``
(the hook reference)::

    from sadl.plugins import OpDef, hookimpl, require_api

    require_api("1.0")

    @hookimpl
    def register_ops():
        return [OpDef("cube", lambda x: x**3, (lambda g, out, x: 3 * g * x * x,))]

What a plugin may import from sadl is public and documented: this module, ``sadl`` itself,
``sadl.backends`` (array modules and devices), ``sadl.random`` (the seeded generators),
``sadl.optim`` (``Optimizer``, ``adam_update``), ``sadl.nn``, ``sadl.ops``, ``sadl.models``,
``sadl.io``, ``sadl.data``, ``sadl.testing``, ``sadl.cuda``, ``sadl.viz`` and ``sadl.cli``.
Everything whose name starts with an underscore is internal, as ``_pytest`` is to pytest.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from sadl import _hookspecs as hookspecs
from sadl._engine import application_hook, new_tensor, recording_hook
from sadl._errors import (
    IncompatiblePluginError,
    PluginConflictError,
    PluginError,
    SadlPluginWarning,
    UnknownNameError,
)
from sadl._hookspecs import hookimpl, records_hookspec
from sadl._host import registry
from sadl._host import reload_plugins as _reload
from sadl._install import install_command
from sadl._known import KNOWN_PROVIDERS
from sadl._ops.take import array_of, checked_dim
from sadl._plugin_records import BackendDef, FormatDef, LayerDef, ModelDef, OptimizerDef
from sadl._records import Example, OpDef
from sadl._version import API_VERSION, __version__

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = [
    "API_VERSION",
    "BackendDef",
    "application_hook",
    "array_of",
    "checked_dim",
    "command_registrations",
    "Example",
    "FormatDef",
    "IncompatiblePluginError",
    "LayerDef",
    "ModelDef",
    "OpDef",
    "OptimizerDef",
    "PluginConflictError",
    "PluginError",
    "SadlPluginWarning",
    "UnknownNameError",
    "hookimpl",
    "hookspecs",
    "install_command",
    "known_providers",
    "plugins",
    "records",
    "served",
    "set_aside",
    "records_hookspec",
    "recording_hook",
    "reload_plugins",
    "require_api",
    "tensor_from_array",
    "version_counter",
]


def require_api(version: str) -> None:
    """Refuse to load (status ``incompatible``) unless this core provides plugin API ``version``.

    Call it at the top of a plugin module: ``require_api("1.0")``.
    """
    try:
        want = (*(int(p) for p in str(version).split(".")), 0)[:2]  # "1" is "1.0"
        have = tuple(int(p) for p in API_VERSION.split("."))
    except ValueError:
        raise ValueError(f"require_api: version must look like '1.0', got {version!r}") from None
    if want[0] != have[0] or want[1] > have[1]:
        raise IncompatiblePluginError(
            f"needs sadl plugin API {version}, but sadl-core {__version__} provides "
            f"{API_VERSION}; install a sadl-core that provides it, or a release of the plugin "
            "built for this one"
        )


def known_providers() -> dict[str, dict[str, str]]:
    """Which first-party distribution provides each name, per kind (what missing names cite).

    ``{"layers": {"Linear": "sadl-layers", ...}, "ops": {...}, ...}`` (a copy).
    """
    return {kind: dict(names) for kind, names in KNOWN_PROVIDERS.items()}


def plugins() -> list[dict[str, object]]:
    """Every discovered plugin as a dict (name, distribution, version, status, error, provides,
    conflicts).
    """
    return [p.as_dict() for p in registry().settle_commands().plugins]


def reload_plugins() -> None:
    """Discover plugins again (after changing ``SADL_DISABLE_PLUGINS`` or installing one)."""
    _reload()


def records(kind: str) -> dict[str, Any]:
    """The registered records of ``kind`` by name (``"ops"``, ``"layers"``, or a kind a plugin
    declared with ``records_hookspec``, such as sadl-compile's ``"compile_passes"``); a copy.
    """
    reg = registry()
    if kind not in reg.kinds:
        known = f"known: {', '.join(sorted(reg.kinds))} (a plugin adds one with records_hookspec)"
        raise UnknownNameError(f"no record kind {kind!r} is registered; {known}")
    return dict(reg.records(kind))


def served(kind: str, name: str) -> Any:
    """The record of ``kind`` called ``name``; raises ``PluginConflictError`` when plugins
    contest the name (none is served), ``UnknownNameError`` (with a hint) when none has it.
    """
    records(kind)  # an unknown kind says so
    return registry().lookup(kind, name)


def set_aside(plugin: str) -> dict[str, dict[str, tuple[Any, PluginConflictError]]]:
    """``kind -> name -> (record, why)``: the records of ``plugin`` that lost a clash, which
    nobody serves from it (``sadl check-plugins`` checks them and reports why); a copy.
    """
    reg = registry().settle_commands()
    for info in reg.plugins:
        if info.name == plugin:
            return {kind: dict(names) for kind, names in info.set_aside.items()}
    names = ", ".join(p.name for p in reg.plugins)
    raise UnknownNameError(f"no plugin named {plugin!r} is installed; installed: {names}")


def tensor_from_array(data: Any) -> Tensor:
    """A leaf Tensor holding ``data`` itself: no copy, no conversion, no checks.

    For code that made ``data`` and knows it is an array of a registered backend (a compiler
    handing back the arrays its replay computed); anything else should call ``sadl.tensor``.
    """
    return new_tensor(data)


def version_counter(tensor: Tensor) -> list[int]:
    """``tensor``'s version counter: a one-element list, shared by tensors viewing one memory.

    Every in-place write adds 1 to ``[0]``; backward compares it with the value an op saved, to
    refuse a gradient computed from overwritten inputs. Code that writes a tensor's memory behind
    the engine's back (a compiled replay) adds 1 itself; ``id()`` of the list tells shared
    memory apart.
    """
    return tensor._version


def command_registrations() -> dict[str, Any]:
    """Each loaded plugin's ``register_commands`` hook, alone, by plugin name: call it with
    ``subparsers=`` to see what it adds.
    """
    reg = registry()
    impls = reg.pluginmanager.hook.register_commands.get_hookimpls()  # of the loaded plugins
    call = functools.partial(reg.call, "register_commands")
    return {impl.plugin_name: functools.partial(call, impl.plugin_name) for impl in impls}
