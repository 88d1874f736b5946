"""Products: matmul (with NumPy's 1-D and batch rules), dot and the 2-norm; ``tensordot``,
``einsum``, ``outer`` and ``inner`` are sadl-layers' (``sadl_layers.ops.contractions``).
"""

from __future__ import annotations

import numpy as np

from sadl._ops.reductions import unreduce
from sadl._records import Example, OpDef
from sadl._threads import matmul  # on the BLAS threads a product's size calls for


def _matmul_grad_a(g, out, a, b):
    if b.ndim == 1:  # (..., n, k) @ (k,) -> (..., n)
        return np.expand_dims(g, -1) * b
    if a.ndim == 1:  # (k,) @ (..., k, n) -> (..., n); the engine sums the batch axes
        return np.squeeze(matmul(np.expand_dims(g, -2), np.swapaxes(b, -1, -2)), -2)
    return matmul(g, np.swapaxes(b, -1, -2))


def _matmul_grad_b(g, out, a, b):
    if a.ndim == 1:  # (k,) @ (..., k, n): outer product of a with each g row
        return g * a if b.ndim == 1 else np.expand_dims(a, -1) * np.expand_dims(g, -2)
    if b.ndim == 1:  # (..., n, k) @ (k,) -> (..., n)
        if a.ndim == 2:
            return matmul(np.swapaxes(a, -1, -2), g)
        return matmul(np.reshape(a, (-1, a.shape[-1])).T, np.reshape(g, (-1,)))
    if b.ndim == 2 and a.ndim > 2:
        # A weight shared across a batch: one large GEMM instead of a batch of small ones.
        return matmul(np.reshape(a, (-1, a.shape[-1])).T, np.reshape(g, (-1, g.shape[-1])))
    return matmul(np.swapaxes(a, -1, -2), g)


MATMUL = OpDef(
    "matmul",
    matmul,
    (_matmul_grad_a, _matmul_grad_b),
    numpy_funcs=(np.matmul,),
    doc="Matrix product of two arrays.",
    examples=(
        Example((3, 4), (4, 5)),
        Example((2, 3, 4), (4, 5)),
        Example((2, 3, 4), (2, 4, 5)),
        Example((2, 1, 3, 4), (5, 4, 2)),
        Example((3, 4), (4,)),
        Example((4,), (4, 5)),
        Example((4,), (4,)),
        Example((4,), (2, 4, 3)),
        Example((2, 3, 4), (4,)),
    ),
)


def _dot(a, b):
    """np.dot: matmul for 1-D and 2-D, a sum product over a's last / b's second-to-last axis."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    if (np.ndim(a) <= 2 and np.ndim(b) <= 2) or np.ndim(b) == 1:
        return matmul(a, b)
    # a's rows against every matrix of b, then a's leading axes first: (*a_lead, *b_lead, n)
    a_shape, b_shape = np.shape(a), np.shape(b)
    rows = matmul(np.reshape(a, (-1, a_shape[-1])), b)  # (*b_lead, rows, n)
    lead = len(b_shape) - 2
    rows = np.transpose(rows, (lead, *range(lead), lead + 1))
    return np.reshape(rows, (*a_shape[:-1], *b_shape[:-2], b_shape[-1]))


DOT = OpDef(
    "dot",
    _dot,
    numpy_funcs=(np.dot,),
    composite=True,
    examples=(
        Example((3, 4), (4, 2)),
        Example((4,), (4,)),
        Example((2, 3, 4), (4, 5)),
        Example((2, 3, 4), (2, 4, 5)),
        Example((2, 3, 4), (4,)),
        Example((2, 3), 1.5),
    ),
)


def _norm(x, *, ord=None, axis=None, keepdims=False):
    """Vector 2-norm (or Frobenius norm): sqrt of the sum of squares."""
    if ord not in (None, 2, "fro") or (ord == 2 and axis is None and np.ndim(x) > 1):
        raise NotImplementedError(
            f"linalg.norm: ord={ord!r} is not supported on Tensors; use the default 2-norm"
        )
    if x.dtype == np.float16:  # squares overflow from |x| = 256: accumulate in float32, as torch
        return _norm(x.astype(np.float32), axis=axis, keepdims=keepdims).astype(x.dtype)
    return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims))


def _norm_grad(g, out, x, *, ord=None, axis=None, keepdims=False):
    # x / norm is 0/0 at x == 0; the gradient there is 0 (the minimal subgradient, as in torch).
    out = unreduce(out, x.shape, axis, keepdims)
    return unreduce(g, x.shape, axis, keepdims) * x / np.where(out == 0, 1.0, out)


NORM = OpDef(
    "norm",
    _norm,
    (_norm_grad,),
    numpy_funcs=(np.linalg.norm,),
    examples=(
        Example((5,)),
        Example((3, 4)),
        Example((3, 4), axis=1),
        Example((2, 3, 4), axis=(0, 2), keepdims=True),
    ),
    singular_points=(
        Example(np.zeros(3)),
        Example(np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]]), axis=1),
    ),
)

OPS = (MATMUL, DOT, NORM)
