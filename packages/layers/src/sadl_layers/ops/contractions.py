"""Contractions beyond matmul: ``tensordot``, ``einsum`` (repeated indices and a summed-out
``...`` as torch), ``outer`` and ``inner``. ``np.einsum(...)`` and
``np.tensordot`` on Tensors reach them through the registry.
"""

from __future__ import annotations

import math
import string

import numpy as np
import sadl
from sadl.backends import on_threads
from sadl.plugins import Example, OpDef


def ADD_AT(*args, **params):
    return sadl.ops.add_at(*args, **params)


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
    NumPy arrays), for the BLAS thread policy (``sadl.backends.on_threads``).
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
    grad = on_threads(
        _macs(a, b, a_axes), np.tensordot, a, g, axes=(a_free, list(range(len(a_free))))
    )
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


__all__ = ["tensordot", "einsum", "outer", "inner"]
INTERNAL_OPS: tuple[OpDef, ...] = ()
tensordot, einsum, outer, inner = TENSORDOT, EINSUM, OUTER, INNER
