"""Padding (``np.pad``, torch's ``F.pad`` modes): the gradient sums back what each padded
position copied. Core has the other layout ops (``roll``, ``repeat``, ``tile``, ``tril``...).
"""

from __future__ import annotations

import numpy as np
import sadl
from sadl.backends import array_module
from sadl.plugins import Example, OpDef


def ADD_AT(*args, **params):
    return sadl.ops.add_at(*args, **params)


# NumPy's names for the modes that copy input values, and torch's names for the same.
_PAD_MODES = {
    "constant": "constant",
    "edge": "edge",
    "replicate": "edge",
    "reflect": "reflect",
    "symmetric": "symmetric",
    "wrap": "wrap",
    "circular": "wrap",
}


def _pad_mode(mode):
    if mode not in _PAD_MODES:
        raise ValueError(
            f"pad: mode={mode!r} is not supported on Tensors; use one of {sorted(_PAD_MODES)}"
        )
    return _PAD_MODES[mode]


def _pad(x, *, pad_width, mode="constant", constant_values=0):
    """Pad with a constant, the edge values, a mirror image or the other end (NumPy's modes).

    ``mode`` is ``constant``, ``edge``, ``reflect``, ``symmetric`` or ``wrap``; torch's names
    ``replicate`` and ``circular`` mean ``edge`` and ``wrap``.
    """
    numpy_mode = _pad_mode(mode)
    if numpy_mode == "constant":
        return np.pad(x, pad_width, mode="constant", constant_values=constant_values)
    if np.any(np.asarray(constant_values) != 0):
        raise ValueError(f"pad: constant_values only applies to mode='constant', not {mode!r}")
    return np.pad(x, pad_width, mode=numpy_mode)


def _pad_grad(g, out, x, *, pad_width, mode="constant", constant_values=0):
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    numpy_mode = _pad_mode(mode)
    if numpy_mode == "constant":
        key = tuple(slice(int(lo), int(lo) + n) for (lo, _), n in zip(widths, x.shape))
        return g[key]
    # Each output element is a copy of one input element, chosen axis by axis: padding the
    # positions 0..n-1 the same way says which, and the gradient is added back there.
    for axis, ((lo, hi), n) in enumerate(zip(widths, x.shape)):
        if lo or hi:
            xp = array_module(g)  # the source positions are made where the gradient lives
            source = xp.pad(xp.arange(n), (int(lo), int(hi)), mode=numpy_mode)
            shape = (*g.shape[:axis], n, *g.shape[axis + 1 :])
            g = ADD_AT(g, shape=shape, key=(slice(None),) * axis + (source,))
    return g


PAD = OpDef(
    "pad",
    _pad,
    (_pad_grad,),
    numpy_funcs=(np.pad,),
    examples=(
        Example((3, 4), pad_width=1),
        Example((2, 3), pad_width=((0, 1), (2, 0))),
        *(
            Example((3, 4), pad_width=((1, 2), (2, 1)), mode=mode)
            for mode in ("edge", "reflect", "symmetric", "wrap", "replicate", "circular")
        ),
        Example((2, 3, 4), pad_width=((0, 0), (1, 1), (3, 0)), mode="reflect"),
    ),
)


__all__ = ["pad"]
INTERNAL_OPS: tuple[OpDef, ...] = ()
pad = PAD
