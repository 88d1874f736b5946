"""numba, when it can be imported, and the switches that turn kernels off.

``SADL_KERNELS=0`` turns every kernel off; ``SADL_KERNELS_DISABLE=layer_norm,gelu`` turns off
the named ones (the names of :data:`sadl_kernels.KERNELS`). Both are read when a function is
compiled, so they can be changed between two ``sadl.compile`` calls. Without numba (not
installed, or failing to import) every pass leaves the graph as it is and says why in the
graph's notes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["enabled", "jit", "jit_sums", "numba_error"]

numba: Any
try:
    import numba

    numba_error = ""
except Exception as exc:  # pragma: no cover - exercised by monkeypatching in the tests
    numba = None
    numba_error = f"numba is not available ({type(exc).__name__}: {exc})"


def jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``numba.njit(cache=True)`` (compiled once per dtype, cached on disk); ``fn`` itself
    when numba is missing (then nothing calls it: the passes do not run).
    """
    if numba is None:  # pragma: no cover
        return fn
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)  # type: ignore[no-any-return]


def jit_sums(fn: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`jit` allowing sums to be reassociated (so their loops vectorize): only the order
    of additions changes, never an elementwise operation.
    """
    if numba is None:  # pragma: no cover
        return fn
    flags = {"reassoc", "nsz"}
    return numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=flags)(fn)  # type: ignore[no-any-return]


def enabled(name: str) -> bool:
    """Whether kernel ``name`` may be used: numba imports and no switch turns it off."""
    if numba is None or numba_error:
        return False
    if os.environ.get("SADL_KERNELS", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    off = {n.strip() for n in os.environ.get("SADL_KERNELS_DISABLE", "").split(",")}
    return name not in off and "all" not in off
