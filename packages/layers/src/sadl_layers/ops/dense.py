"""Dense layers' ops: linear, embedding lookup and dropout.

``linear`` flattens the leading axes so the forward and each gradient are ONE 2-D GEMM, never a
batch of small ones. ``embedding`` gathers rows; its gradient scatter-adds them back (repeated ids
accumulate) through ``embedding_backward``, an op whose own gradient is the gather again.
``dropout`` takes its keep-mask explicitly (``mask=``) or derives it from ``seed=``, so the
forward and the backward drop the same elements and gradcheck sees a fixed function.
"""

from __future__ import annotations

import math

import numpy as np
from sadl.backends import array_module, device_of, matmul, to_device
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, check_int, const, no_grad_rule, shape_of

__all__ = ["linear", "embedding", "dropout"]

# ---------------------------------------------------------------------------------- linear


def _check_linear(x, weight, bias):
    check_float("linear", "weight", weight)
    if weight.ndim != 2:
        raise ValueError(
            f"linear: weight must have shape (out_features, in_features), got {shape_of(weight)}"
        )
    n_out, n_in = weight.shape
    if x.ndim < 1 or x.shape[-1] != n_in:
        raise ValueError(
            f"linear: input has shape {shape_of(x)}, expected (..., {n_in}) to match weight "
            f"of shape {shape_of(weight)}"
        )
    if bias is not None and shape_of(bias) != (n_out,):
        raise ValueError(f"linear: bias has shape {shape_of(bias)}, expected ({n_out},)")


def _linear(x, weight, bias=None):
    """Affine map x @ weight.T + bias over any leading axes (bias may be None), one 2-D GEMM."""
    _check_linear(x, weight, bias)
    n_out, n_in = weight.shape
    if x.ndim == 2:
        out = matmul(x, weight.T)
    else:
        out = matmul(_rows(x, n_in), weight.T).reshape(*x.shape[:-1], n_out)
    if bias is not None:
        out += bias
    return out


def _rows(a, n):
    """``a`` as a matrix of ``n`` columns (leading axes merged; spelled out, as -1 cannot be
    inferred when ``n`` is 0).
    """
    return np.reshape(a, (math.prod(shape_of(a)[:-1]), n))


def _linear_grad_x(g, out, x, weight, bias=None):
    return np.reshape(matmul(_rows(g, weight.shape[0]), weight), shape_of(x))


def _linear_grad_weight(g, out, x, weight, bias=None):
    return matmul(_rows(g, weight.shape[0]).T, _rows(x, weight.shape[1]))


def _linear_grad_bias(g, out, x, weight, bias=None):
    # ones @ g, a BLAS GEMV: about 3x faster than ``sum(axis=0)``, which NumPy adds row by row.
    rows = _rows(g, weight.shape[0])
    return matmul(array_module(g).ones(rows.shape[0], dtype=const(g).dtype), rows)


linear = OpDef(
    "linear",
    _linear,
    (_linear_grad_x, _linear_grad_weight, _linear_grad_bias),
    examples=(
        Example((3, 4), (5, 4), (5,)),
        Example((3, 4), (5, 4)),
        Example((2, 3, 4), (5, 4), (5,)),
        Example((4,), (3, 4), (3,)),
        Example((2, 1, 3, 4), (2, 4), None),
        Example((3, 4), np.zeros((0, 4)), np.zeros(0)),  # no output features
    ),
)


# ------------------------------------------------------------------------------- embedding


def _check_ids(fn, ids, num_embeddings):
    check_int(fn, "ids", ids)
    # A boolean test, not the ids' values read into Python: under sadl.compile it is a guard
    # that every replay checks again.
    outside = (ids < 0) | (ids >= num_embeddings)
    if ids.size and outside.any():
        bad = ids[outside].reshape(-1)[0]
        raise ValueError(
            f"{fn}: ids holds {int(bad)}, expected ids in [0, {num_embeddings}) "
            f"(num_embeddings={num_embeddings})"
        )


def _embedding(weight, ids, *, padding_idx=None):
    """Rows of ``weight`` (num_embeddings, dim) picked by integer ``ids`` of any shape.

    With ``padding_idx`` the gradient of that row is held at zero (torch's semantics: the padding
    row is not trained), which is deliberately not the true derivative.
    """
    check_float("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ValueError(
            f"embedding: weight must have shape (num_embeddings, embedding_dim), got "
            f"{shape_of(weight)}"
        )
    _check_ids("embedding", ids, weight.shape[0])
    return np.take(weight, ids, axis=0)


def _embedding_backward(g, ids, *, num_embeddings, padding_idx=None):
    """Scatter-add rows of g (..., dim) into a (num_embeddings, dim) table at ``ids``."""
    dim = g.shape[-1]
    flat_ids = ids.reshape(-1)
    xp = array_module(g)
    out = xp.zeros(num_embeddings * dim, dtype=g.dtype)
    # One flat add.at over element offsets is several times faster than a 2-D add.at on rows.
    offsets = (flat_ids[:, None] * dim + xp.arange(dim)).reshape(-1)
    xp.add.at(out, offsets, xp.ascontiguousarray(g).reshape(-1))
    out = out.reshape(num_embeddings, dim)
    if padding_idx is not None:
        out[padding_idx] = 0
    return out


def _embedding_backward_grad_g(gg, out, g, ids, *, num_embeddings, padding_idx=None):
    picked = embedding(gg, ids)
    if padding_idx is None:
        return picked
    return picked * (ids != padding_idx)[..., None].astype(const(g).dtype)


EMBEDDING_BACKWARD: OpDef = OpDef(
    "embedding_backward",
    _embedding_backward,
    (_embedding_backward_grad_g, no_grad_rule),
    examples=(
        Example((4, 3), np.array([0, 2, 0, 2]), num_embeddings=5),
        Example((2, 2, 3), np.array([[1, 1], [3, 0]]), num_embeddings=4, padding_idx=0),
    ),
)


def _embedding_grad_weight(g, out, weight, ids, *, padding_idx=None):
    return EMBEDDING_BACKWARD(g, ids, num_embeddings=weight.shape[0], padding_idx=padding_idx)


embedding: OpDef = OpDef(
    "embedding",
    _embedding,
    (_embedding_grad_weight, no_grad_rule),
    examples=(
        Example((5, 3), np.array([0, 2, 0, 4, 2])),
        Example((4, 2), np.array([[1, 1, 3], [0, 1, 1]])),
    ),
)


# --------------------------------------------------------------------------------- dropout


def _keep_mask(x, p, mask, seed):
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p!r}")
    if mask is not None:
        try:
            fits = np.broadcast_shapes(shape_of(mask), shape_of(x)) == shape_of(x)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"dropout: mask has shape {shape_of(mask)}, expected a shape that broadcasts "
                f"to the input's {shape_of(x)}"
            )
        return array_module(x).asarray(mask).astype(bool, copy=False)  # a host mask moves over
    if seed is None:
        raise ValueError(
            "dropout: pass mask= (a boolean keep-mask) or seed= (an int), so the forward and "
            "the backward drop the same elements"
        )
    # A seed names one mask: drawn from NumPy's generator, the same on every device (only the
    # booleans travel to a device).
    keep = np.random.default_rng(seed).random(shape_of(x), dtype=np.float32) >= p
    return keep if isinstance(x, np.ndarray) else to_device(keep, device_of(x))


def _scale(p):
    return 1.0 / (1.0 - float(p)) if p < 1 else 0.0


def _dropout(x, *, p=0.5, mask=None, seed=None):
    """Zero elements with probability p and scale the rest by 1 / (1 - p) (mask or seed)."""
    keep = _keep_mask(x, p, mask, seed)
    out = x * keep
    out *= _scale(p)
    return out


def _dropout_grad(g, out, x, *, p=0.5, mask=None, seed=None):
    return g * _keep_mask(const(x), p, mask, seed) * _scale(p)


dropout = OpDef(
    "dropout",
    _dropout,
    (_dropout_grad,),
    examples=(
        Example((3, 4), p=0.5, seed=0),
        Example((2, 3), p=0.25, mask=np.array([[True, False, True], [True, True, False]])),
        Example((2, 3, 4), p=0.5, mask=np.array([[[True, False, True, True]]])),
        Example((3, 4), p=1.0, seed=1),
    ),
)

INTERNAL_OPS = (EMBEDDING_BACKWARD,)
