"""Every exception and warning of sadl's own (re-exported by ``sadl`` and ``sadl.plugins``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "CommandError",
    "CompileError",
    "CompileWarning",
    "IncompatiblePluginError",
    "MissingGradientError",
    "PluginConflictError",
    "PluginError",
    "SadlPluginWarning",
    "UnknownNameError",
    "broadcast_error",
]


class MissingGradientError(RuntimeError):
    """An op without a backward rule was used on a tensor that requires grad."""


class PluginError(RuntimeError):
    """A plugin failed to import or register (raised only under ``SADL_PLUGINS_STRICT=1``)."""


class PluginConflictError(PluginError):
    """Two plugins registered the same name; the message names both."""


class IncompatiblePluginError(PluginError):
    """A plugin asked (through ``require_api``) for a plugin API this core does not provide."""


class UnknownNameError(AttributeError):
    """A name no installed plugin registers; the message says which package would provide it."""


class SadlPluginWarning(UserWarning):
    """A plugin was skipped because it failed to load (once per discovery)."""


class CommandError(Exception):
    """Raised by a command to stop with one line on stderr and an exit status (2 by default).

    ``raise CommandError(f"{path}: no such file")`` prints ``sadl <command>: error: <path>: no
    such file`` and exits with status 2 (``sadl.cli.EXIT_USAGE``); pass ``status=1``
    (``EXIT_FAILURE``) for a failure that is not the user's input.
    """

    def __init__(self, message: str, status: int = 2, prog: str | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.prog = message, status, prog


class CompileError(RuntimeError):
    """``sadl.compile`` met Python it cannot replay (a tensor's value read into Python ...)."""


class CompileWarning(UserWarning):
    """``sadl.compile`` fell back or retraced often enough to cost more than it saves."""


def broadcast_error(exc: ValueError, label: str, datas: Sequence[Any]) -> ValueError:
    """NumPy's shape-mismatch error with the op's name and its inputs' shapes; others as they are.

    NumPy says only ``operands could not be broadcast together with shapes (2,3) (4,)``.
    """
    text = str(exc)
    if "could not be broadcast" not in text and "cannot be broadcast" not in text:
        return exc  # NumPy's words only: an op's own message already says what is wrong
    shapes = " and ".join(str(tuple(d.shape)) for d in datas if hasattr(d, "shape"))
    return ValueError(
        f"{label}: input shapes {shapes} do not broadcast (from the last axis on, the sizes "
        f"must be equal or 1); NumPy: {text.strip()}"
    )
