"""torch's tensor vocabulary that core leaves out: ``copysign``, ``lerp``, ``logcumsumexp``,
``softmin``, ``quick_gelu``, ``normalize``, ``diag``, ``meshgrid`` and ``masked_select``.

``copysign`` is an op of its own (NumPy's ``np.copysign`` dispatches to it); the others are
composites of core's ops, so their first and second derivatives come from those. Each takes
torch's argument names (``dim``, ``p``, ``eps``, ``indexing``) and follows torch's conventions
where they differ from NumPy's (``meshgrid`` indexes ``"ij"`` by default, ``diag`` of a vector
is a matrix and of a matrix its diagonal).
"""

from __future__ import annotations

import numpy as np
import sadl
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import const, shape_of

__all__ = [
    "copysign",
    "lerp",
    "logcumsumexp",
    "softmin",
    "quick_gelu",
    "normalize",
    "diag",
    "meshgrid",
    "masked_select",
]


def _copysign(x, y):
    """|x| with the sign of y, elementwise (integers become the default float dtype, as in
    torch). The gradient for x is sign(x) * sign(result) (0 at x == 0), for y zero (zeros, not
    None, so ``sadl.grad`` w.r.t. y works as torch's does).
    """
    out = np.copysign(x, y)
    if not any(getattr(getattr(a, "dtype", None), "kind", "") == "f" for a in (x, y)):
        out = out.astype(sadl.get_default_dtype(), copy=False)
    return out


copysign: OpDef = OpDef(
    "copysign",
    _copysign,
    (lambda g, out, x, y: g * (np.sign(x) * np.sign(out)), lambda g, out, x, y: np.zeros_like(g)),
    numpy_funcs=(np.copysign,),
    examples=(
        Example((3, 4), (3, 4)),
        Example((3, 4), (4,)),
        Example((3,), -1.5),
    ),
)


def _lerp(input, end, weight):
    """``input + weight * (end - input)`` (``weight`` a number or a tensor), as torch.lerp."""
    return input + weight * (end - input)


lerp: OpDef = OpDef(
    "lerp",
    _lerp,
    composite=True,
    examples=(Example((3, 4), (3, 4), (3, 4)), Example((2, 3), (3,), 0.3)),
)


def _axis(dim, x):
    n = max(np.ndim(x), 1)
    d = int(dim)
    if not -n <= d < n:
        raise ValueError(f"dim {dim} is out of range for an input with {np.ndim(x)} axes")
    return d % n


def _logcumsumexp(x, dim):
    """log(cumsum(exp(x), dim)) without overflow or underflow, as torch.logcumsumexp.

    Each prefix is a stable ``logsumexp`` over a lower-triangular mask (quadratic in the
    length of ``dim``: meant for the short axes of sequence models, not for millions).
    """
    axis = _axis(dim, x)
    if np.ndim(x) == 0:  # a 0-d input is its own one-element prefix (torch returns it as is)
        return x + 0.0
    moved = np.moveaxis(x, axis, -1)
    n = shape_of(moved)[-1]
    xp = array_module(const(x))
    keep = xp.tril(xp.ones((n, n), dtype=bool))  # row j keeps entries i <= j
    rows = np.where(keep, np.expand_dims(moved, -2), -np.inf)
    return np.moveaxis(sadl.ops.logsumexp(rows, axis=-1), -1, axis)


logcumsumexp: OpDef = OpDef(
    "logcumsumexp",
    _logcumsumexp,
    composite=True,
    examples=(
        Example((3, 5), 1),
        Example((4, 2, 3), 0),
        Example(np.array([-1000.0, 0.0, 1000.0, -5.0]), 0),  # no overflow, no underflow
        Example(np.array(0.5), -1),  # 0-d: the input itself
    ),
)


def _softmin(x, dim=None):
    """``softmax(-x, dim)`` (torch.nn.functional.softmin; ``dim`` is required in practice)."""
    if dim is None:
        raise ValueError("softmin: pass dim (the axis to normalize over), as torch asks")
    return sadl.ops.softmax(-x, axis=int(dim))


softmin: OpDef = OpDef(
    "softmin", _softmin, composite=True, examples=(Example((3, 4), 1), Example((3, 4), 0))
)


def _quick_gelu(x):
    """``x * sigmoid(1.702 * x)``: the GELU approximation of CLIP (``QuickGELU``)."""
    return x * sadl.ops.sigmoid(1.702 * x)


quick_gelu: OpDef = OpDef(
    "quick_gelu", _quick_gelu, composite=True, examples=(Example((3, 4), domain=(-4.0, 4.0)),)
)


def _normalize(input, p=2.0, dim=1, eps=1e-12):
    """``input / max(||input||_p along dim, eps)``, as torch.nn.functional.normalize.

    ``p=0`` counts the nonzero entries (torch's 0-"norm"), a constant: its gradient is zero.
    """
    axis, p = _axis(dim, input), float(p)
    if p == 0.0:
        x = const(input)
        norm = np.sum(x != 0, axis=axis, keepdims=True).astype(x.dtype)
    elif p == 2.0:  # core's 2-norm, whose gradient at a zero vector is 0 (as torch's)
        norm = sadl.ops.norm(input, axis=axis, keepdims=True)
    elif p == np.inf:
        norm = np.max(np.abs(input), axis=axis, keepdims=True)
    else:
        norm = np.sum(np.abs(input) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    return input / np.maximum(norm, eps)


normalize: OpDef = OpDef(
    "normalize",
    _normalize,
    composite=True,
    examples=(
        Example((3, 4)),
        Example((2, 3, 4), 1.0, -1),
        Example((2, 5), 3.0, 0),
        Example((2, 5), 0.0, 1),  # the count of nonzeros: a constant divisor
    ),
)


def _diag(input, diagonal=0):
    """A vector's diagonal matrix (shifted by ``diagonal``), or a matrix's diagonal, as
    torch.diag.
    """
    k = int(diagonal)
    if np.ndim(input) == 2:
        return np.diagonal(input, offset=k).copy()
    if np.ndim(input) != 1:
        raise ValueError(f"diag: input must be a vector or a matrix, got shape {shape_of(input)}")
    n = shape_of(input)[0]
    m = n + abs(k)
    xp = array_module(const(input))
    padded = np.pad(input, (k, 0) if k >= 0 else (0, -k))
    return xp.eye(m, k=k, dtype=const(input).dtype) * padded


diag: OpDef = OpDef(
    "diag",
    _diag,
    composite=True,
    examples=(
        Example((4,)),
        Example((3,), 2),
        Example((3,), -1),
        Example((3, 4)),
        Example((4, 3), -1),
    ),
)


def _meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-D inputs, as torch.meshgrid (``indexing="ij"`` by default; ``"xy"``
    swaps the first two axes, as NumPy's default does).
    """
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    for t in tensors:
        if np.ndim(t) > 1:
            raise ValueError(f"meshgrid: expected 0-d or 1-d inputs, got shape {shape_of(t)}")
    sizes = [max(shape_of(t)[0], 1) if np.ndim(t) else 1 for t in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[i] for i in order)
    out = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[order.index(i)] = sizes[i]
        out.append(np.broadcast_to(np.reshape(t, tuple(view)), shape))
    return tuple(out)


meshgrid: OpDef = OpDef(
    "meshgrid",
    _meshgrid,
    composite=True,
    examples=(Example((3,), (4,)), Example((2,), (3,), (2,), indexing="xy")),
)


def _masked_select(input, mask):
    """The elements of ``input`` where the (broadcast) boolean ``mask`` is True, as a 1-D
    tensor in row-major order (torch.masked_select).
    """
    m = const(mask)
    if getattr(m, "dtype", None) is None or m.dtype != np.bool_:
        raise TypeError(
            f"masked_select: mask must be a boolean array, got {getattr(m, 'dtype', m)}"
        )
    shape = np.broadcast_shapes(shape_of(input), shape_of(m))
    return np.broadcast_to(input, shape)[array_module(m).broadcast_to(m, shape)]


masked_select: OpDef = OpDef(
    "masked_select",
    _masked_select,
    composite=True,
    examples=(
        Example((3, 4), np.array([[True, False, True, True]] * 2 + [[False] * 4])),
        Example((2, 3), np.array([True, False, True])),
    ),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
