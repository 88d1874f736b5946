"""GELU (tanh form) forward and backward as kernels for the recorded ``gelu`` and
``gelu_backward`` op applications (``sadl_kernels._ops``), by the ops' registered names.

The arithmetic is ``_elementwise.py``'s loops (tolerance documented there), run block by block
of 64K elements with a block-sized scratch kept per thread, as sadl-layers' blocks run: each
block's scratch stays in the cache. float32 only (the vectorized tanh is float32's); any other
dtype, and the exact (erf) form, stay with the op's own code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_kernels._api import OpRegion, Value
from sadl_kernels._elementwise import _gelu_backward, _gelu_forward
from sadl_kernels._match import contiguous
from sadl_kernels._norm import Array, scratch

__all__ = ["BLOCK", "GELU_KERNELS", "gelu_backward_into", "gelu_forward_into"]

#: The tanh form's constants, as sadl-layers (and torch) define them.
C = math.sqrt(2.0 / math.pi)
AC = 0.044715 * C
BLOCK = 65536


def gelu_forward_into(x: Array, out: Array) -> None:
    """``out = 0.5 * x * (1 + tanh(c * (x + a x^3)))`` over the flat elements."""
    x1, o1 = x.reshape(-1), out.reshape(-1)
    s = scratch("gelu", (min(BLOCK, max(x1.size, 1)),), x1.dtype)
    for i in range(0, x1.size, BLOCK):
        j = min(i + BLOCK, x1.size)
        _gelu_forward(x1[i:j], s[: j - i], o1[i:j], AC, C)


def gelu_backward_into(g: Array, x: Array, out: Array) -> None:
    """``out = g * GELU'(x)`` (tanh form) over the flat elements."""
    x1, g1, o1 = x.reshape(-1), g.reshape(-1), out.reshape(-1)
    s = scratch("gelu2", (2, min(BLOCK, max(x1.size, 1))), x1.dtype)
    for i in range(0, x1.size, BLOCK):
        j = min(i + BLOCK, x1.size)
        m = j - i
        _gelu_backward(x1[i:j], g1[i:j], s[0, :m], s[1, :m], o1[i:j], AC, C, 3.0 * AC, C)


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
