"""The plugin API: ``hookimpl``, the records, ``require_api`` and the errors.

A plugin package declares an entry point in the group ``sadl.plugins`` that names a module; in that
module, functions decorated with ``hookimpl`` implement the hooks of
:mod:`sadl.plugins.hookspecs`::

    from sadl.plugins import OpDef, hookimpl, require_api

    require_api("1.0")

    @hookimpl
    def register_ops():
        return [OpDef("cube", lambda x: x**3, (lambda g, out, x: 3 * g * x * x,))]
"""

from __future__ import annotations

import pluggy

from sadl.plugins.errors import (
    IncompatiblePluginError,
    PluginConflictError,
    PluginError,
    SadlPluginWarning,
    UnknownNameError,
)
from sadl.plugins.records import Example, FormatDef, LayerDef, ModelDef, OpDef, OptimizerDef

__all__ = [
    "API_VERSION",
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
    "plugins",
    "reload_plugins",
    "require_api",
]

#: The plugin API this core provides: ``major.minor``. A plugin written for ``1.x`` (x <= minor)
#: works with it; a new major version means incompatible changes.
API_VERSION = "1.0"

hookimpl = pluggy.HookimplMarker("sadl")


def require_api(version: str) -> None:
    """Refuse to load (status ``incompatible``) unless this core provides plugin API ``version``.

    Call it at the top of a plugin module: ``require_api("1.0")``.
    """
    try:
        want = tuple(int(p) for p in str(version).split("."))[:2]
        have = tuple(int(p) for p in API_VERSION.split("."))
    except ValueError:
        raise ValueError(f"require_api: version must look like '1.0', got {version!r}") from None
    want = want + (0,) * (2 - len(want))
    if want[0] != have[0] or want[1] > have[1]:
        from sadl import __version__

        raise IncompatiblePluginError(
            f"needs sadl plugin API {version}, but sadl-core {__version__} provides "
            f"{API_VERSION}; install a sadl-core that provides it, or a release of the plugin "
            "built for this one"
        )


def plugins() -> list[dict[str, object]]:
    """Every discovered plugin as a dict (name, distribution, version, status, error, provides)."""
    from sadl.plugins.manager import registry

    return [p.as_dict() for p in registry().plugins]


def reload_plugins() -> None:
    """Discover plugins again (after changing ``SADL_DISABLE_PLUGINS`` or installing one)."""
    from sadl.plugins import manager

    manager.reload_plugins()
