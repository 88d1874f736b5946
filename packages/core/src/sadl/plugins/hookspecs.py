"""What a sadl plugin may do: the hook specifications, the single source of truth.

A plugin is a module (named by an entry point in the group ``sadl.plugins``) with functions
decorated by ``sadl.plugins.hookimpl`` and named after the hooks below. Each ``register_*`` hook
takes no arguments and returns an iterable of frozen records; sadl collects them per plugin, so
every name is attributed to the plugin that provides it. Core registers its own ops and
optimizers through these same hooks.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from sadl.plugins.records import FormatDef, LayerDef, ModelDef, OpDef, OptimizerDef

hookspec = pluggy.HookspecMarker("sadl")


@hookspec
def register_ops() -> Iterable[OpDef]:
    """Return the ops this plugin provides (``OpDef`` records), served as ``sadl.ops.<name>``.

    An op's ``numpy_funcs`` make NumPy calls on Tensors reach it (``np.tanh(t)``).
    """
    raise NotImplementedError


@hookspec
def register_layers() -> Iterable[LayerDef]:
    """Return layer classes (``LayerDef`` records): ``sadl.nn.<Name>`` and ``sadl.<Name>``."""
    raise NotImplementedError


@hookspec
def register_optimizers() -> Iterable[OptimizerDef]:
    """Return optimizer and learning-rate scheduler classes, served as ``sadl.optim.<Name>``."""
    raise NotImplementedError


@hookspec
def register_models() -> Iterable[ModelDef]:
    """Return model factories (``ModelDef`` records), built by ``sadl.models.create(name)``."""
    raise NotImplementedError


@hookspec
def register_formats() -> Iterable[FormatDef]:
    """Return file formats (``FormatDef`` records) for ``sadl.save`` / ``sadl.load``."""
    raise NotImplementedError


@hookspec
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add subcommands to the ``sadl`` command line.

    Call ``subparsers.add_parser(name, help=...)`` and ``parser.set_defaults(func=handler)``;
    ``handler(args)`` returns the exit status (None means 0).
    """
    raise NotImplementedError


@hookspec(historic=True)
def add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications of your own (``pluginmanager.add_hookspecs(module)``).

    Historic: plugins registered later are called too, so the order of installation does not
    matter.
    """


#: The hooks that return records, in the order sadl collects them, with the record kind they feed.
RECORD_HOOKS = {
    "register_ops": "ops",
    "register_layers": "layers",
    "register_optimizers": "optimizers",
    "register_models": "models",
    "register_formats": "formats",
}
