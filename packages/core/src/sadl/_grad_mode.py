"""Whether ops record the graph: ``no_grad`` / ``enable_grad``, per thread.

Both are context managers and decorators. Each thread starts with recording on.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    enabled = True

    def __init__(self) -> None:
        self.stack: list[bool] = []


_state = _GradState()


def is_grad_enabled() -> bool:
    """True when ops on grad-requiring tensors record the graph (the default)."""
    return _state.enabled


class set_grad_enabled:
    """Turn graph recording on or off for a ``with`` block or a decorated function."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        _state.stack.append(_state.enabled)
        _state.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        _state.enabled = _state.stack.pop()

    def __call__(self, func: F) -> F:
        # The saved state lives on a per-thread stack, not on self, so one instance can wrap a
        # function that many threads call at once.
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(set_grad_enabled):
    """Do not record the graph: results do not require grad (inference, optimizer updates).

    >>> import sadl
    >>> x = sadl.tensor([1.0], requires_grad=True)
    >>> with sadl.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Record the graph again inside a ``no_grad`` region."""

    def __init__(self) -> None:
        super().__init__(True)
