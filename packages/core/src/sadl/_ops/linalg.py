"""Products: matmul (with NumPy's 1-D and batch rules), tensordot, einsum, and friends."""

from __future__ import annotations

import math
import string

import numpy as np

from sadl._ops._rules import unreduce
from sadl._ops.indexing import ADD_AT
from sadl._records import Example, OpDef
from sadl._threads import matmul, on_threads  # on the BLAS threads a product's size calls for


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
    if np.ndim(a) <= 2 and np.ndim(b) <= 2:
        return matmul(a, b)
    return np.tensordot(a, b, axes=([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]))


DOT = OpDef(
    "dot",
    _dot,
    numpy_funcs=(np.dot,),
    composite=True,
    examples=(
        Example((3, 4), (4, 2)),
        Example((4,), (4,)),
        Example((2, 3, 4), (4, 5)),
        Example((2, 3), 1.5),
    ),
)


def _normalize_tensordot_axes(axes, a_ndim, b_ndim):
    if isinstance(axes, int | np.integer):
        n = int(axes)
        return list(range(a_ndim - n, a_ndim)), list(range(n))
    a_axes, b_axes = axes
    a_axes = [a_axes] if isinstance(a_axes, int | np.integer) else list(a_axes)
    b_axes = [b_axes] if isinstance(b_axes, int | np.integer) else list(b_axes)
    return [int(x) % a_ndim for x in a_axes], [int(x) % b_ndim for x in b_axes]


def _macs(a, b, a_axes):
    """Multiply-adds of ``tensordot(a, b)`` over ``a_axes`` and of either gradient's (0 but on
    NumPy arrays).
    """
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return 0
    return a.size * b.size // max(1, math.prod(a.shape[i] for i in a_axes))


def _tensordot(a, b, *, axes=2):
    """Sum products over the given axes of ``a`` and ``b``."""
    a_axes, _ = _normalize_tensordot_axes(axes, np.ndim(a), np.ndim(b))
    return on_threads(_macs(a, b, a_axes), np.tensordot, a, b, axes=axes)


def _tensordot_grad_a(g, out, a, b, *, axes=2):
    a_axes, b_axes = _normalize_tensordot_axes(axes, a.ndim, b.ndim)
    a_free = [i for i in range(a.ndim) if i not in a_axes]
    b_free = [i for i in range(b.ndim) if i not in b_axes]
    # g's axes: a_free then b_free. Contract g's b_free part with b's free axes.
    g_axes = (list(range(len(a_free), g.ndim)), b_free)
    grad = on_threads(_macs(a, b, a_axes), np.tensordot, g, b, axes=g_axes)
    # grad's axes: a_free, then b's contracted axes in b order -> the paired a axes.
    pairs = sorted(zip(b_axes, a_axes))
    order = a_free + [ai for _, ai in pairs]
    return np.transpose(grad, tuple(np.argsort(order)))


def _tensordot_grad_b(g, out, a, b, *, axes=2):
    a_axes, b_axes = _normalize_tensordot_axes(axes, a.ndim, b.ndim)
    a_free = [i for i in range(a.ndim) if i not in a_axes]
    b_free = [i for i in range(b.ndim) if i not in b_axes]
    g_axes = (a_free, list(range(len(a_free))))
    grad = on_threads(_macs(a, b, a_axes), np.tensordot, a, g, axes=g_axes)
    pairs = sorted(zip(a_axes, b_axes))
    order = [bi for _, bi in pairs] + b_free
    return np.transpose(grad, tuple(np.argsort(order)))


TENSORDOT = OpDef(
    "tensordot",
    _tensordot,
    (_tensordot_grad_a, _tensordot_grad_b),
    numpy_funcs=(np.tensordot,),
    examples=(
        Example((2, 3, 4), (3, 4, 5)),
        Example((2, 3, 4), (4, 2), axes=([0, 2], [1, 0])),
        Example((3, 4), (5,), axes=0),
    ),
)


def _parse_einsum(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Explicit per-operand letters and output letters, with '...' spelled out."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operand subscripts for {len(shapes)} operands")
    used = set(spec)
    spare = [c for c in string.ascii_letters if c not in used]
    ell_ndim = 0
    for term, shape in zip(terms, shapes):
        if "..." in term:
            ell_ndim = max(ell_ndim, len(shape) - (len(term) - 3))
    ell = "".join(spare[:ell_ndim])
    full = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            k = len(shape) - (len(term) - 3)
            term = term.replace("...", ell[ell_ndim - k :] if k else "")
        full.append(term)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {c: "".join(full).count(c) for c in set("".join(full))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return full, out


def _fit_broadcast_letters(partial, letters, size):
    """An operand's gradient over ``letters``, fitted to the operand's ``size`` of each letter.

    einsum broadcasts a letter of size 1 against the other operands' size: the gradient is
    summed where this operand had size 1, and broadcast where another operand had size 1 (the
    same value along it; the engine never broadcasts a gradient up itself).
    """
    shape = tuple(size[c] for c in letters)
    if tuple(partial.shape) == shape:
        return partial
    axes = tuple(k for k, (p, n) in enumerate(zip(partial.shape, shape)) if n == 1 and p != 1)
    if axes:
        partial = np.sum(partial, axis=axes, keepdims=True)
    return np.broadcast_to(partial, shape)


def _einsum(subscripts, *operands):
    """Einstein summation over the operands (``np.einsum``; ``...`` may also be summed out)."""
    lhs, arrow, rhs = subscripts.replace(" ", "").partition("->")
    if arrow and "..." in lhs and "..." not in rhs:
        # NumPy refuses to sum the broadcast axes away; torch sums them: spell them out.
        terms, out = _parse_einsum(subscripts, [np.shape(o) for o in operands])
        subscripts = ",".join(terms) + "->" + out
    return np.einsum(subscripts, *operands)


def _einsum_grad(g, out, subscripts, *operands):
    terms, out_term = _parse_einsum(subscripts, [tuple(o.shape) for o in operands])
    grads: list = [None]
    for i, (term, x) in enumerate(zip(terms, operands)):
        others = [(t, o) for j, (t, o) in enumerate(zip(terms, operands)) if j != i]
        available = set(out_term).union(*(set(t) for t, _ in others))
        letters = "".join(dict.fromkeys(term))  # a repeated index ('ii') counts once
        size = {c: x.shape[k] for k, c in enumerate(term)}
        kept = "".join(c for c in letters if c in available)
        spec = ",".join([out_term, *(t for t, _ in others)]) + "->" + kept
        partial = _fit_broadcast_letters(np.einsum(spec, g, *(o for _, o in others)), kept, size)
        if kept != letters:  # letters summed only inside this operand: broadcast back
            view = [size[c] if c in available else 1 for c in letters]
            partial = np.broadcast_to(np.reshape(partial, view), [size[c] for c in letters])
        if letters != term:  # a repeated index reads a diagonal: the gradient goes back there
            partial = ADD_AT(partial, shape=tuple(x.shape), key=_diagonal_key(term, letters, size))
        grads.append(partial)
    return tuple(grads)


def _diagonal_key(term, letters, size):
    """The index that puts an array over ``letters`` onto the diagonals ``term`` repeats."""
    key = []
    for c in term:
        view = [1] * len(letters)
        view[letters.index(c)] = size[c]
        key.append(np.arange(size[c]).reshape(view))
    return tuple(key)


EINSUM = OpDef(
    "einsum",
    _einsum,
    _einsum_grad,
    numpy_funcs=(np.einsum,),
    examples=(
        Example("ij,jk->ik", (3, 4), (4, 2)),
        Example("bij,bjk->bik", (2, 3, 4), (2, 4, 2)),
        Example("ij->i", (3, 4)),
        Example("i,j", (3,), (4,)),
        Example("...ij,jk->...ik", (2, 3, 4), (4, 5)),
        Example("ij,ij->", (3, 4), (3, 4)),
        Example("ii->", (3, 3)),
        Example("iij->j", (3, 3, 2)),
        Example("ij,ii->j", (3, 2), (3, 3)),
        Example("...ij->ij", (2, 3, 4)),
        Example("b...i,...i->b", (2, 3, 4), (3, 4)),
    ),
)


def _outer(a, b):
    """Outer product of two vectors (inputs are flattened)."""
    return np.reshape(a, (-1, 1)) * np.reshape(b, (1, -1))


OUTER = OpDef(
    "outer",
    _outer,
    numpy_funcs=(np.outer,),
    composite=True,
    examples=(Example((3,), (4,)),),
)


def _inner(a, b):
    """Inner product over the last axes."""
    return (
        np.tensordot(a, b, axes=([np.ndim(a) - 1], [np.ndim(b) - 1]))
        if np.ndim(a) and np.ndim(b)
        else a * b
    )


INNER = OpDef(
    "inner",
    _inner,
    numpy_funcs=(np.inner,),
    composite=True,
    examples=(Example((3,), (3,)), Example((2, 3), (4, 3))),
)


def _norm(x, *, ord=None, axis=None, keepdims=False):
    """Vector 2-norm (or Frobenius norm): sqrt of the sum of squares."""
    if ord not in (None, 2, "fro") or (ord == 2 and axis is None and np.ndim(x) > 1):
        raise NotImplementedError(
            f"linalg.norm: ord={ord!r} is not supported on Tensors; use the default 2-norm"
        )
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

OPS = (MATMUL, DOT, TENSORDOT, EINSUM, OUTER, INNER, NORM)
