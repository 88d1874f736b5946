"""numba, imported when a kernel is first needed, and the switches that turn kernels off.

``SADL_KERNELS=0`` turns every kernel off; ``SADL_KERNELS_DISABLE=layer_norm,gelu`` turns off
the named ones (the names of :data:`sadl_kernels.KERNELS`). Both are read when a function is
compiled, so they can be changed between two ``sadl.compile`` calls. Without numba (not
installed, or failing to import) every pass leaves the graph as it is and says why in the
graph's notes.

numba takes about a second to import, so loading the plugin does not import it: the first
``sadl.compile`` trace that runs a pass does, and each kernel is compiled at its first call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["enabled", "jit", "jit_sums", "numba_error"]

#: ``numba``: the module once imported; ``error``: "" when it imported, the reason otherwise,
#: None before the first try.
STATE: dict[str, Any] = {"numba": None, "error": None}


def numba_error() -> str:
    """Why numba cannot be used ("" when it can); imports it on the first call."""
    if STATE["error"] is None:
        try:
            import numba

            STATE["numba"], STATE["error"] = numba, ""
        except Exception as exc:  # pragma: no cover - exercised by patching STATE in the tests
            STATE["error"] = f"numba is not available ({type(exc).__name__}: {exc})"
    return str(STATE["error"])


class Kernel:
    """A function compiled by ``numba.njit`` at its first call (and cached on disk).

    Kernels called from other kernels (module globals of the same kind) are compiled first and
    put in place of their lazy stand-ins, so numba sees dispatchers.
    """

    def __init__(self, fn: Callable[..., Any], fastmath: frozenset[str]) -> None:
        self.fn = fn
        self.fastmath = fastmath
        self.compiled: Callable[..., Any] | None = None
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def dispatcher(self) -> Callable[..., Any]:
        """The numba dispatcher (made on the first call)."""
        if self.compiled is None:
            if numba_error():
                raise RuntimeError(f"sadl-kernels: {numba_error()}")
            scope = self.fn.__globals__
            for name in self.fn.__code__.co_names:  # the kernels this one calls
                value = scope.get(name)
                if isinstance(value, Kernel):
                    scope[name] = value.dispatcher()
            options: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
            if self.fastmath:
                options["fastmath"] = set(self.fastmath)
            self.compiled = STATE["numba"].njit(**options)(self.fn)
        return self.compiled

    def __call__(self, *args: Any) -> Any:
        return (self.compiled or self.dispatcher())(*args)


def jit(fn: Callable[..., Any]) -> Kernel:
    """``numba.njit(cache=True)``, compiled once per dtype at the first call."""
    return Kernel(fn, frozenset())


def jit_sums(fn: Callable[..., Any]) -> Kernel:
    """:func:`jit` allowing sums to be reassociated (so their loops vectorize): only the order
    of additions changes, never an elementwise operation.
    """
    return Kernel(fn, frozenset({"reassoc", "nsz"}))


def enabled(name: str) -> bool:
    """Whether kernel ``name`` may be used: no switch turns it off and numba imports."""
    if os.environ.get("SADL_KERNELS", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    off = {n.strip() for n in os.environ.get("SADL_KERNELS_DISABLE", "").split(",")}
    return name not in off and "all" not in off and not numba_error()
