"""Scaled dot-product attention as one fused op with its own analytic backward.

``scaled_dot_product_attention(q, k, v)`` takes ``q (..., Tq, d)``, ``k (..., Tk, d)``,
``v (..., Tk, dv)`` (leading axes broadcast) and returns ``softmax(q k^T * scale + mask) v``.

* ``causal=True`` lets query ``i`` see keys ``0 .. Tk - Tq + i``: the mask is aligned to the
  END, so a query block that continues a KV cache (Tq < Tk) sees the whole past. For Tq == Tk
  it is the usual lower triangle.
* ``mask`` is a boolean keep-mask (True = attend) or an additive float mask (``-inf`` = blocked),
  broadcastable to ``(..., Tq, Tk)``. A query that sees no key at all gets a zero output (and
  zero gradient) instead of NaN. A float mask is an input: one that requires grad (a learned
  relative-position bias) gets its gradient, summed over the axes it was broadcast along.
* ``dropout_mask`` (optional) multiplies the attention probabilities after the softmax (a scaled
  keep-mask, as ``MultiHeadAttention(dropout=p)`` draws it).

The work is done slab by slab over the leading (batch, head) axes, so the (Tq, Tk) score matrix
of a slab stays in the CPU cache and the full (..., Tq, Tk) probability tensor is never stored:
the backward recomputes each slab's probabilities from q and k (as flash attention does), which
keeps peak memory at the size of q, k, v and the output. A causal self-attention (Tq == Tk, at
least ``_CAUSAL_SPLIT`` queries, no ``mask``) runs as two halves of the queries: the first half
sees only the first half of the keys, so the all-masked quarter of the scores is never computed
(the same forward bit for bit; the backward adds the halves' dk and dv). No keys (Tk = 0): zeros.

The backward is an op of its own (``scaled_dot_product_attention_backward``: dq, dk and dv in
one pass, packed into one array), whose gradient :func:`_second_order` writes in NumPy
vocabulary, so second and higher derivatives work.

``attention_qkv`` is the same computation on a packed ``(B, T, 3 * C)`` projection (GPT-2's
``c_attn`` output) returning ``(B, T, C)`` with the heads merged, so a causal self-attention
layer is one node between its two linear layers, with no split/transpose/merge nodes. Its
backward op ``attention_qkv_backward`` writes dq, dk, dv straight into one ``(B, T, 3 * C)``
gradient. GPT (sadl-models) and ``CausalSelfAttention`` use it for training; a generation step
over a KV cache calls ``scaled_dot_product_attention`` with fewer queries than keys.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from sadl.backends import array_module, matmul
from sadl.plugins import Example, OpDef

from sadl_layers.ops import _gqa
from sadl_layers.ops._common import check_float, const, in_float32, packed_empty, shape_of, unpack
from sadl_layers.ops._softmax import MASKED_SOFTMAX, SOFTMAX_BACKWARD

__all__ = ["scaled_dot_product_attention", "attention_qkv"]

_FN = "scaled_dot_product_attention"
#: Score elements per slab: (slab heads) x Tq x Tk stays within the L2 cache.
_SLAB = 1 << 16


@functools.lru_cache(maxsize=64)
def _causal_keep(tq: int, tk: int, xp: Any = np) -> Any:
    """Boolean (tq, tk) keep-mask: query i sees keys 0 .. tk - tq + i (aligned to the end).

    Made by the array module ``xp`` of the inputs, so it lives where they do (cached per
    module; read-only on the host, where NumPy can enforce it).
    """
    keep = xp.tri(tq, tk, k=tk - tq, dtype=bool)
    if xp is np:
        keep.flags.writeable = False
    return keep


@functools.lru_cache(maxsize=64)
def _causal_bias(tq: int, tk: int, dtype: np.dtype, xp: Any = np) -> Any:
    """The additive (tq, tk) causal bias, 0 where allowed and -inf elsewhere (read-only)."""
    bias = xp.where(_causal_keep(tq, tk, xp), 0.0, -np.inf).astype(dtype)
    if xp is np:
        bias.flags.writeable = False
    return bias


def _check_mask(name, mask, lead, tq, tk):
    full = (*lead, tq, tk)
    try:
        ok = np.broadcast_shapes(shape_of(mask), full) == full
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{_FN}: {name} has shape {shape_of(mask)}, expected a shape that broadcasts to "
            f"{full} (..., queries, keys)"
        )


def _scores_bias(lead, tq, tk, causal, mask, dtype, xp):
    """An additive (.., tq, tk) bias (0 / -inf / float mask) and the rows that see some key.

    Returns ``(bias or None, row_ok or None)``, ``row_ok`` only when a query sees no key (its
    row un-masked for the softmax, zeroed after); made with ``xp``, q's array module.
    """
    cached = np if xp.__name__ == "numpy" else xp  # cached constants: NumPy's, not a tracer's
    if mask is None and causal and tq <= tk:
        return _causal_bias(tq, tk, np.dtype(dtype), cached), None  # every query sees some key
    keep = _causal_keep(tq, tk, cached) if causal else None
    add = None
    if mask is not None:
        mask = xp.asarray(mask)
        _check_mask("mask", mask, lead, tq, tk)
        if mask.dtype == bool:
            keep = mask if keep is None else keep & mask
        else:
            finite = np.isfinite(mask)
            if not finite.all():
                keep = finite if keep is None else keep & finite
                add = np.where(finite, mask, 0.0).astype(dtype)
            else:
                add = mask.astype(dtype, copy=False)
    if keep is None:
        return add, None
    row_ok = None
    any_key = np.any(keep, axis=-1, keepdims=True)
    if not any_key.all():
        row_ok = any_key
        keep = keep | ~any_key
    bias = np.where(keep, 0.0, -np.inf).astype(dtype)
    if add is not None:
        bias = bias + add
    return bias, row_ok


def _check_qkv(q, k, v):
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_float(_FN, name, a)
        if a.ndim < 2:
            raise ValueError(f"{_FN}: {name} must have shape (..., T, features), got {shape_of(a)}")
    d, tk = q.shape[-1], k.shape[-2]
    if k.shape[-1] != d:
        raise ValueError(
            f"{_FN}: k has shape {shape_of(k)}, expected (..., Tk, {d}) (the feature size of q "
            f"of shape {shape_of(q)})"
        )
    if v.shape[-2] != tk:
        raise ValueError(
            f"{_FN}: v has shape {shape_of(v)}, expected (..., {tk}, dv) (as many rows as k of "
            f"shape {shape_of(k)})"
        )
    try:
        return np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"{_FN}: the leading (batch, head) axes of q {shape_of(q)}, k {shape_of(k)} and "
            f"v {shape_of(v)} do not broadcast"
        ) from None


def _slabs(lead, per_item):
    """Index tuples covering ``lead`` in slabs of about ``_SLAB`` score elements.

    Whole trailing axes go into one slab while they fit, so (batch, heads) with small heads is a
    few large batched GEMMs rather than many tiny ones.
    """
    if not lead:
        yield ()
        return
    budget = max(1, _SLAB // max(per_item, 1))
    first_whole, size = len(lead), 1
    while first_whole > 0 and size * lead[first_whole - 1] <= budget:
        first_whole -= 1
        size *= lead[first_whole]
    if first_whole == 0:
        yield ()
        return
    step = max(1, budget // size)
    axis = first_whole - 1
    for head in np.ndindex(*lead[:axis]):
        for i in range(0, lead[axis], step):
            yield (*head, slice(i, i + step))


def _lead_view(a, lead, tail=None):
    """``a`` as ``(*lead, *tail)`` (tail: its last two axes by default), to read: a or a view."""
    if a is None or a.shape == (shape := (*lead, *(a.shape[-2:] if tail is None else tail))):
        return a
    return np.broadcast_to(a, shape)


def _softmax_keys(st, bias_t, row_ok_t):
    """Softmax over the KEY axis -2 of transposed scores (.., Tk, Tq) plus the bias (the op
    ``masked_softmax``, a new array), kept transposed (one column per query) because NumPy
    reduces over an outer axis with vectorized row-by-row operations, noticeably faster than
    over the innermost axis; a query that sees no key gets zeros.
    """
    pt = MASKED_SOFTMAX(st, bias_t, axis=-2)
    if row_ok_t is not None:
        pt *= row_ok_t
    return pt


def _transposed(a, lead, tail, contiguous=False):
    """``a`` (.., Tq, Tk) as a (lead, Tk, Tq) view with its last two axes swapped.

    With ``contiguous`` the swapped array is copied BEFORE broadcasting (a small mask stays
    small; only its transposed layout is materialized).
    """
    if a is None:
        return None
    a = np.broadcast_to(a, np.broadcast_shapes(a.shape, tail))
    swapped = np.swapaxes(a, -1, -2)
    if contiguous:
        swapped = array_module(swapped).ascontiguousarray(swapped)
    return np.broadcast_to(swapped, (*lead, tail[1], tail[0]))


def _attend(q, k, v, out, lead, bias, row_ok, scale, dmask):
    """Write softmax(q k^T scale + bias) (* dmask) v into ``out``, slab by slab (arrays)."""
    tq, tk = q.shape[-2], k.shape[-2]
    qb, kb, vb = _lead_view(q, lead), _lead_view(k, lead), _lead_view(v, lead)
    bt = _transposed(bias, lead, (tq, tk), contiguous=True)
    rt, dt = _transposed(row_ok, lead, (tq, 1)), _transposed(dmask, lead, (tq, tk))
    for idx in _slabs(lead, tq * tk):
        st = matmul(kb[idx], np.swapaxes(qb[idx] * scale, -1, -2))  # (.., Tk, Tq)
        pt = _softmax_keys(st, None if bt is None else bt[idx], None if rt is None else rt[idx])
        if dt is not None:
            pt *= dt[idx]
        matmul(np.swapaxes(pt, -1, -2), vb[idx], out=out[idx])
    return out


def _attend_backward(g, out, q, k, v, dq, dk, dv, lead, bias, row_ok, scale, dmask):
    """dq, dk, dv (broadcast leading shape) of the attention, slab by slab, in place."""
    tq, tk = q.shape[-2], k.shape[-2]
    qb, kb, vb = _lead_view(q, lead), _lead_view(k, lead), _lead_view(v, lead)
    gb = _lead_view(g, lead)
    bt = _transposed(bias, lead, (tq, tk), contiguous=True)
    rt, dt = _transposed(row_ok, lead, (tq, 1)), _transposed(dmask, lead, (tq, tk))
    for idx in _slabs(lead, tq * tk):
        ki, vi, gi = kb[idx], vb[idx], gb[idx]
        qs = qb[idx] * scale
        st = matmul(ki, np.swapaxes(qs, -1, -2))  # P^T, recomputed: (.., Tk, Tq)
        pt = _softmax_keys(st, None if bt is None else bt[idx], None if rt is None else rt[idx])
        matmul(pt if dt is None else pt * dt[idx], gi, out=dv[idx])  # dv = P^T g
        dpt = matmul(vi, np.swapaxes(gi, -1, -2))  # dP^T = (g v^T)^T
        if dt is not None:
            dpt *= dt[idx]
        dst = SOFTMAX_BACKWARD(dpt, pt, axis=-2)  # dS^T / scale
        dqi = dq[idx]
        matmul(np.swapaxes(dst, -1, -2), ki, out=dqi)
        dqi *= scale
        matmul(dst, qs, out=dk[idx])


def _second_order(uq, uk, uv, g, out, q, k, v, bias, row_ok, scale, dmask):
    """The gradient of ``<uq, dq> + <uk, dk> + <uv, dv>`` w.r.t. g, out (None: the backward
    does not read it), q, k and v.

    ``dq, dk, dv`` are the attention's gradients for the upstream ``g``, as
    :func:`_attend_backward` computes them: with ``S = scale q k^T + bias``, ``P = softmax(S)``,
    ``M`` the dropout mask, ``dP = (g v^T) M``, ``D = rowsum(dP * P)`` and
    ``dS = P * (dP - D)`` (``softmax_backward``): ``dq = scale dS k``, ``dk = scale dS^T q``,
    ``dv = (P M)^T g``. With ``h = scale (uq k^T + q uk^T)``, ``<uq, dq> + <uk, dk> = <h, dS>
    = <P * (h - rowsum(h * P)), dP>``. Written in NumPy vocabulary, so it runs on Tensors as
    well (third derivatives).
    """
    kt, vt = np.swapaxes(k, -1, -2), np.swapaxes(v, -1, -2)
    p = MASKED_SOFTMAX((q @ kt) * scale, bias, axis=-1)
    if row_ok is not None:
        p = p * row_ok
    dp = g @ vt  # d<g, out>/dP (with the dropout mask applied below)
    gu = g @ np.swapaxes(uv, -1, -2)  # d<uv, dv>/dP
    if dmask is not None:
        dp, gu = dp * dmask, gu * dmask
    dp_centered = dp - np.sum(dp * p, axis=-1, keepdims=True)
    ds = p * dp_centered  # dS: the first-order gradient of the scores S
    h = (uq @ kt + q @ np.swapaxes(uk, -1, -2)) * scale  # <uq, dq> + <uk, dk> = <h, dS>
    w_rows = np.sum(h * p, axis=-1, keepdims=True)
    dh = p * (h - w_rows)  # d<h, dS>/dP at fixed P: dS's dependence on dP
    dhm = dh if dmask is None else dh * dmask
    pm = p if dmask is None else p * dmask
    z = h * dp_centered - w_rows * dp + gu  # d(product)/dP
    ds2 = p * (z - np.sum(z * p, axis=-1, keepdims=True))  # d(product)/dS, through P
    d_g = dhm @ v + pm @ uv
    d_q = (ds @ uk + ds2 @ k) * scale
    d_k = (np.swapaxes(ds, -1, -2) @ uq + np.swapaxes(ds2, -1, -2) @ q) * scale
    d_v = np.swapaxes(dhm, -1, -2) @ g
    return d_g, None, d_q, d_k, d_v


def _prepare(q, k, v, causal, mask, scale, dropout_mask):
    lead = _check_qkv(q, k, v)
    tq, tk = q.shape[-2], k.shape[-2]
    xp = array_module(q)
    bias, row_ok = _scores_bias(lead, tq, tk, causal, mask, q.dtype, xp)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    dmask = None
    if dropout_mask is not None:
        dmask = xp.asarray(dropout_mask)
        _check_mask("dropout_mask", dmask, lead, tq, tk)
        if dmask.dtype != q.dtype:
            dmask = dmask.astype(q.dtype)
    return lead, bias, row_ok, scale, dmask


def _grad_shapes(q, k, v):
    """The shapes of dq, dk, dv: each input's last two axes after the broadcast leading axes."""
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return tuple((*lead, *a.shape[-2:]) for a in (q, k, v))


#: Causal self-attention over at least this many queries runs in two halves of the queries:
#: the first half sees only the first half of the keys, so a quarter of the scores (all masked)
#: is never computed, in the forward and in the backward.
_CAUSAL_SPLIT = 128


def _causal_halves(q, k, causal, mask):
    """``[(query rows, key columns), ...]`` of a causal attention worth splitting, else None."""
    tq, tk = q.shape[-2], k.shape[-2]
    if not causal or mask is not None or tq != tk or tq < _CAUSAL_SPLIT:
        return None
    h = tq // 2
    return [(slice(h, None), slice(None)), (slice(0, h), slice(0, h))]


def _part(a, rows):
    return None if a is None else a[..., rows, :]


def _dropout_part(dropout_mask, q, k, rows, keys):
    if dropout_mask is None:
        return None
    dm = array_module(q).asarray(dropout_mask)
    dm = np.broadcast_to(dm, np.broadcast_shapes(dm.shape, (q.shape[-2], k.shape[-2])))
    return dm[..., rows, keys]


def _attend_all(q, k, v, out, lead, causal, mask, scale, dropout_mask):
    """:func:`_attend` with the inputs' masks prepared, over causal halves where they pay."""
    _, bias, row_ok, sc, dmask = _prepare(q, k, v, causal, mask, scale, dropout_mask)  # checks
    halves = _causal_halves(q, k, causal, mask)
    if halves is None:
        return _attend(q, k, v, out, lead, bias, row_ok, sc, dmask)
    for rows, keys in halves:
        qh, kh, vh = q[..., rows, :], k[..., keys, :], v[..., keys, :]
        dm = _dropout_part(dropout_mask, q, k, rows, keys)
        _, bias, row_ok, sc, dmask = _prepare(qh, kh, vh, True, None, scale, dm)
        _attend(qh, kh, vh, out[..., rows, :], lead, bias, row_ok, sc, dmask)
    return out


def _attend_backward_all(g, out, q, k, v, dq, dk, dv, lead, causal, mask, scale, dropout_mask):
    """:func:`_attend_backward` with the masks prepared, over causal halves where they pay."""
    _, bias, row_ok, sc, dmask = _prepare(q, k, v, causal, mask, scale, dropout_mask)  # checks
    halves = _causal_halves(q, k, causal, mask)
    if halves is None:
        _attend_backward(g, out, q, k, v, dq, dk, dv, lead, bias, row_ok, sc, dmask)
        return
    xp = array_module(q)
    for n, (rows, keys) in enumerate(halves):  # all keys first: it writes every row of dk, dv
        qh, kh, vh = q[..., rows, :], k[..., keys, :], v[..., keys, :]
        dm = _dropout_part(dropout_mask, q, k, rows, keys)
        _, bias, row_ok, sc, dmask = _prepare(qh, kh, vh, True, None, scale, dm)
        dkh, dvh = dk[..., keys, :], dv[..., keys, :]
        if n:  # the keys the first queries see: their share is added
            dkh, dvh = xp.empty_like(dkh), xp.empty_like(dvh)
        gh, oh, dqh = g[..., rows, :], out[..., rows, :], dq[..., rows, :]
        _attend_backward(gh, oh, qh, kh, vh, dqh, dkh, dvh, lead, bias, row_ok, sc, dmask)
        if n:
            dk[..., keys, :] += dkh
            dv[..., keys, :] += dvh


@in_float32(promote=True)
def _sdpa(q, k, v, mask=None, *, causal=False, scale=None, dropout_mask=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v over any leading axes (one fused op).

    ``enable_gqa``: k and v may have fewer heads (axis -3) than q, as in torch (see ``_gqa``).
    """
    if enable_gqa:
        gq, gk, gv, p = _gqa.views(q, k, v, {"mask": mask, "dropout_mask": dropout_mask})
        return _gqa.merge(_sdpa(gq, gk, gv, causal=causal, scale=scale, **p), q)
    lead = _check_qkv(q, k, v)
    out = array_module(q).empty((*lead, q.shape[-2], v.shape[-1]), dtype=np.result_type(q, k, v))
    return _attend_all(q, k, v, out, lead, causal, mask, scale, dropout_mask)


def _sdpa_grad(g, out, q, k, v, mask=None, *, needs_input_grad, **params):
    if params.pop("enable_gqa", False):
        gq, gk, gv, p = _gqa.views(q, k, v, {**params, "mask": mask})
        grads = _sdpa_grad(
            _gqa.merge_view(g, gq), _gqa.merge_view(out, gq), gq, gk, gv, p.pop("mask"),
            needs_input_grad=needs_input_grad, **p,
        )  # fmt: skip
        merged = (_gqa.merge(grads[0], q), _gqa.merge_kv(grads[1]), _gqa.merge_kv(grads[2]))
        return merged + tuple(None if d is None else _gqa.merge(d, q) for d in grads[3:])
    if len(needs_input_grad) == 4 and needs_input_grad[3]:
        return _grads_with_mask(g, q, k, v, mask, **params)
    grads = tuple(
        unpack(SDPA_BACKWARD(g, out, q, k, v, mask=const(mask), **params), *_grad_shapes(q, k, v))
    )
    return grads if len(needs_input_grad) == 3 else (*grads, None)


def _grads_with_mask(g, q, k, v, mask, *, causal=False, scale=None, dropout_mask=None):
    """dq, dk, dv and the gradient of an additive float mask (a learned bias), in NumPy
    vocabulary: on Tensors too, so every higher derivative sees the mask as well.

    With ``S = scale q k^T + mask``, ``P = softmax(S)`` (times the dropout mask ``M``) and
    ``dP = (g v^T) M``: ``dS = P (dP - rowsum(P dP))`` is the mask's gradient, ``dq = scale dS k``,
    ``dk = scale dS^T q``, ``dv = (P M)^T g``. It holds the whole (..., Tq, Tk) ``P``, as the
    mask itself does.
    """
    cm = const(mask)
    if cm.dtype.kind != "f":
        raise TypeError(f"{_FN}: only a float (additive) mask has a gradient, got {cm.dtype}")
    _, bias, row_ok, sc, dm = _prepare(
        const(q), const(k), const(v), causal, cm, scale, dropout_mask
    )
    with np.errstate(invalid="ignore"):  # -inf - -inf where the mask blocks: not taken
        own = np.where(np.isfinite(cm), mask - cm, 0.0)  # zero, carrying the mask's own graph
    p = MASKED_SOFTMAX((q @ np.swapaxes(k, -1, -2)) * sc + own, bias, axis=-1)
    if row_ok is not None:
        p = p * row_ok
    pm, dp = (
        (p, g @ np.swapaxes(v, -1, -2)) if dm is None else (p * dm, g @ np.swapaxes(v, -1, -2) * dm)
    )
    ds = SOFTMAX_BACKWARD(dp, p, axis=-1)
    return (ds @ k) * sc, (np.swapaxes(ds, -1, -2) @ q) * sc, np.swapaxes(pm, -1, -2) @ g, ds


@in_float32(promote=True)
def _sdpa_backward(g, out, q, k, v, *, causal=False, mask=None, scale=None, dropout_mask=None):
    """dq, dk, dv of the attention for the upstream ``g``, back to back in one flat array."""
    lead = _check_qkv(q, k, v)
    shapes = ((*lead, *a.shape[-2:]) for a in (q, k, v))
    packed, (dq, dk, dv) = packed_empty(q, np.result_type(g, q, k, v), *shapes)
    _attend_backward_all(g, out, q, k, v, dq, dk, dv, lead, causal, mask, scale, dropout_mask)
    return packed


def _sdpa_backward_grad(
    gg, _, g, out, q, k, v, *, causal=False, mask=None, scale=None, dropout_mask=None
):
    uq, uk, uv = unpack(gg, *_grad_shapes(q, k, v))
    if shape_of(k)[-2] == 0:  # no keys: every first derivative is a constant 0
        return tuple(a * 0.0 for a in (g, out, q, k, v))
    cq, ck, cv = const(q), const(k), const(v)
    _, bias, row_ok, scale, dmask = _prepare(cq, ck, cv, causal, mask, scale, dropout_mask)
    return _second_order(uq, uk, uv, g, out, q, k, v, bias, row_ok, scale, dmask)


_KEEP_SOME = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)  # row 1 sees none
_ADDITIVE = np.array([[0.0, -1.0, -np.inf]] * 3)
_DROP_3x3 = np.array([[2.0, 0.0, 2.0], [2.0, 2.0, 0.0], [0.0, 2.0, 2.0]])

scaled_dot_product_attention: OpDef = OpDef(
    "scaled_dot_product_attention",
    _sdpa,
    _sdpa_grad,
    examples=(
        Example((2, 3, 4), (2, 5, 4), (2, 5, 3)),
        Example((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 3), causal=True),
        Example((2, 2, 3), (2, 5, 3), (2, 5, 4), causal=True),  # a block after a KV cache
        Example((1, 2, 1, 3), (1, 2, 4, 3), (1, 2, 4, 3), causal=True),  # one new token, heads
        Example((2, 1, 3, 4), (1, 2, 3, 4), (2, 2, 3, 2), scale=0.3),
        Example((1, 3, 2), (1, 4, 2), (1, 4, 2), mask=_KEEP_SOME),
        Example((2, 3, 2), (2, 3, 2), (2, 3, 2), mask=_ADDITIVE),
        Example((2, 3, 2), (2, 3, 2), (2, 3, 3), causal=True, dropout_mask=_DROP_3x3),
        Example((2, 3, 2), (2, 4, 2), (2, 4, 3), (3, 4)),  # a learned float mask: an input
        Example((2, 3, 2), (2, 3, 2), (2, 3, 3), (2, 1, 3), causal=True, dropout_mask=_DROP_3x3),
        Example((2, 4, 3, 2), (2, 2, 3, 2), (2, 2, 3, 3), causal=True, enable_gqa=True),
        Example((1, 6, 2, 3), (1, 2, 4, 3), (1, 2, 4, 2), enable_gqa=True, mask=_KEEP_SOME[:2]),
        Example((1, 4, 3, 2), (1, 2, 3, 2), (1, 2, 3, 3), (4, 3, 3), enable_gqa=True),  # learned
    ),
)
SDPA_BACKWARD: OpDef = OpDef(
    "scaled_dot_product_attention_backward",
    _sdpa_backward,
    _sdpa_backward_grad,
    examples=(
        Example((2, 3, 3), (2, 3, 3), (2, 3, 4), (2, 5, 4), (2, 5, 3)),
        Example((1, 2, 2, 3), (1, 2, 2, 3), (1, 2, 2, 3), (1, 2, 4, 3), (1, 2, 4, 3), causal=True),
        Example((2, 2, 3, 2), (2, 2, 3, 2), (2, 1, 3, 4), (1, 2, 3, 4), (2, 2, 3, 2), scale=0.3),
        Example((1, 3, 2), (1, 3, 2), (1, 3, 2), (1, 4, 2), (1, 4, 2), mask=_KEEP_SOME),
        Example((2, 3, 2), (2, 3, 2), (2, 3, 2), (2, 3, 2), (2, 3, 2), mask=_ADDITIVE),
        Example(
            (2, 3, 3),
            (2, 3, 3),
            (2, 3, 2),
            (2, 3, 2),
            (2, 3, 3),
            causal=True,
            dropout_mask=_DROP_3x3,
        ),
    ),
)


# ------------------------------------------------------------------ packed self-attention


def _split_qkv(qkv, n_head):
    """(B, T, 3C) -> q, k, v of shape (B, H, T, C/H) (views of an array; Tensors too)."""
    check_float("attention_qkv", "qkv", qkv)
    if qkv.ndim != 3 or qkv.shape[-1] % (3 * n_head):
        raise ValueError(
            f"attention_qkv: qkv has shape {shape_of(qkv)}, expected (B, T, 3 * C) with C "
            f"divisible by n_head={n_head}"
        )
    B, T, C3 = qkv.shape
    parts = np.transpose(np.reshape(qkv, (B, T, 3, n_head, C3 // (3 * n_head))), (2, 0, 3, 1, 4))
    return parts[0], parts[1], parts[2]


def _heads(a, n_head):
    """(B, T, C) -> (B, H, T, C/H) (a view of an array; Tensors too)."""
    B, T, C = a.shape
    return np.transpose(np.reshape(a, (B, T, n_head, C // n_head)), (0, 2, 1, 3))


def _merge_heads(a):
    """(B, H, T, d) -> (B, T, H * d), the inverse of :func:`_heads`."""
    B, H, T, d = a.shape
    return np.reshape(np.transpose(a, (0, 2, 1, 3)), (B, T, H * d))


@in_float32
def _attention_qkv(qkv, *, n_head, causal=True, mask=None, scale=None, dropout_mask=None):
    """Multi-head attention on a packed (B, T, 3C) q|k|v projection -> (B, T, C), heads merged."""
    q, k, v = _split_qkv(qkv, n_head)
    lead = _check_qkv(q, k, v)
    B, H, T, hd = q.shape
    out = array_module(qkv).empty((B, T, H * hd), dtype=qkv.dtype)
    _attend_all(q, k, v, _heads(out, H), lead, causal, mask, scale, dropout_mask)
    return out


@in_float32
def _attention_qkv_backward(
    g, out, qkv, *, n_head, causal=True, mask=None, scale=None, dropout_mask=None
):
    """d<attention_qkv(qkv), g>/dqkv, (B, T, 3C), written in place head by head."""
    q, k, v = _split_qkv(qkv, n_head)
    lead = _check_qkv(q, k, v)
    dqkv = array_module(qkv).empty(qkv.shape, dtype=np.result_type(g, qkv))
    dq, dk, dv = _split_qkv(dqkv, n_head)
    g_h, out_h = _heads(g, n_head), _heads(out, n_head)
    _attend_backward_all(g_h, out_h, q, k, v, dq, dk, dv, lead, causal, mask, scale, dropout_mask)
    return dqkv


def _attention_qkv_backward_grad(
    gg, _, g, out, qkv, *, n_head, causal=True, mask=None, scale=None, dropout_mask=None
):
    cq, ck, cv = _split_qkv(const(qkv), n_head)
    _, bias, row_ok, scale, dmask = _prepare(cq, ck, cv, causal, mask, scale, dropout_mask)
    q, k, v = _split_qkv(qkv, n_head)
    uq, uk, uv = _split_qkv(gg, n_head)
    g_h, out_h = _heads(g, n_head), _heads(out, n_head)
    d_g, d_out, d_q, d_k, d_v = _second_order(
        uq, uk, uv, g_h, out_h, q, k, v, bias, row_ok, scale, dmask
    )
    d_qkv = np.reshape(np.transpose(np.stack([d_q, d_k, d_v]), (1, 3, 0, 2, 4)), qkv.shape)
    return _merge_heads(d_g), None if d_out is None else _merge_heads(d_out), d_qkv


_DROP_HEADS = np.array([[[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [2.0, 2.0, 2.0]]] * 2)

attention_qkv: OpDef = OpDef(
    "attention_qkv",
    _attention_qkv,
    lambda g, out, qkv, **params: (ATTENTION_QKV_BACKWARD(g, out, qkv, **params),),
    examples=(
        Example((2, 4, 12), n_head=2),
        Example((1, 3, 6), n_head=1, causal=False),
        Example((2, 3, 12), n_head=2, mask=np.array([[True, True, False]] * 3)),
        Example((1, 3, 6), n_head=2, dropout_mask=_DROP_HEADS[0]),
        Example((1, 3, 12), n_head=2, dropout_mask=_DROP_HEADS[None]),  # (B, H, T, T), as GPT
    ),
)
ATTENTION_QKV_BACKWARD: OpDef = OpDef(
    "attention_qkv_backward",
    _attention_qkv_backward,
    _attention_qkv_backward_grad,
    examples=(
        Example((2, 3, 4), (2, 3, 4), (2, 3, 12), n_head=2),
        Example((1, 3, 6), (1, 3, 6), (1, 3, 18), n_head=3, causal=False, scale=0.5),
        Example((1, 3, 4), (1, 3, 4), (1, 3, 12), n_head=2, dropout_mask=_DROP_HEADS[None]),
    ),
)

INTERNAL_OPS = (SDPA_BACKWARD, ATTENTION_QKV_BACKWARD)
