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

from sadl import _hookspecs as hookspecs
from sadl._errors import (
    IncompatiblePluginError,
    PluginConflictError,
    PluginError,
    SadlPluginWarning,
    UnknownNameError,
)
from sadl._hookspecs import hookimpl
from sadl._host import registry
from sadl._host import reload_plugins as _reload
from sadl._known import KNOWN_PROVIDERS, install_command
from sadl._records import (
    BackendDef,
    CompilePassDef,
    Example,
    FormatDef,
    LayerDef,
    ModelDef,
    OpDef,
    OptimizerDef,
)
from sadl._version import API_VERSION, __version__

__all__ = [
    "API_VERSION",
    "BackendDef",
    "CompilePassDef",
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
    "reload_plugins",
    "require_api",
]


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
    reg = registry()
    reg.settle_commands()
    return [p.as_dict() for p in reg.plugins]


def reload_plugins() -> None:
    """Discover plugins again (after changing ``SADL_DISABLE_PLUGINS`` or installing one)."""
    _reload()
