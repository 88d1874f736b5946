"""GELU (tanh form) forward and backward as kernels for the recorded ``gelu`` and
``gelu_backward`` op applications (``sadl_kernels._ops``), by the ops' registered names.

The arithmetic is ``_elementwise.py``'s loops (tolerance documented there): one kernel call
over the whole array, its ``prange`` over fixed chunks on the threads sadl's policy gives (one
below two threads' share; the same chunks, so the same bits, on any count). float32 only (the
vectorized tanh is float32's); any other dtype, and the exact (erf) form, stay with the op's
own code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_kernels._api import OpRegion, Value
from sadl_kernels._elementwise import _gelu_backward, _gelu_forward
from sadl_kernels._match import contiguous

__all__ = ["GELU_KERNELS", "gelu_backward_into", "gelu_forward_into"]

Array = np.ndarray[Any, Any]

#: The tanh form's constants, as sadl-layers (and torch) define them.
C = math.sqrt(2.0 / math.pi)
AC = 0.044715 * C


def gelu_forward_into(x: Array, out: Array) -> None:
    """``out = 0.5 * x * (1 + tanh(c * (x + a x^3)))`` over the flat elements."""
    _gelu_forward.launch(x.size, x, out, AC, C)


def gelu_backward_into(g: Array, x: Array, out: Array) -> None:
    """``out = g * GELU'(x)`` (tanh form) over the flat elements."""
    _gelu_backward.launch(x.size, x, g, out, AC, C, 3.0 * AC, C)


def _float32(*values: Any) -> bool:
    return all(
        type(v) is Value
        and v.dtype == np.float32
        and contiguous(v)
        and v.storage.device is None
        and v.shape == values[0].shape
        for v in values
    )


def _call(region: OpRegion) -> tuple[Callable[..., None], tuple[Any, ...], Value] | None:
    if region.params.get("approximate") != "tanh" or len(region.outputs) != 1:
        return None
    out = region.outputs[0]
    if out is None:
        return None
    if region.op.name == "gelu_backward" and len(region.inputs) == 2:
        g, x = region.inputs
        return (gelu_backward_into, (g, x, out), out) if _float32(x, g, out) else None
    if region.op.name == "gelu" and len(region.inputs) == 1:
        (x,) = region.inputs
        return (gelu_forward_into, (x, out), out) if _float32(x, out) else None
    return None


#: The kernel for each registered op name (see ``sadl_kernels._ops.OP_KERNELS``).
GELU_KERNELS: dict[str, Callable[[OpRegion], Any]] = {"gelu": _call, "gelu_backward": _call}
