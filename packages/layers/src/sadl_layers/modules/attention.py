"""Attention layers: ``MultiHeadAttention``, torch's ``MultiheadAttention`` and GPT-2's
``CausalSelfAttention``.

Both take batch-first inputs ``(B, T, E)``. Self-attention runs as three graph nodes: the packed
q|k|v projection (one GEMM), the fused multi-head attention on the packed projection (split
heads, softmax(q k^T / sqrt(d)) v, merge heads; its own analytic backward), and the output
projection.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from sadl import Parameter, Tensor
from sadl.backends import is_array

from sadl_layers.modules._base import (
    Layer,
    as_tensor,
    check_count,
    param_dtype,
    resolve_generator,
)
from sadl_layers.modules.dense import Dropout, Linear
from sadl_layers.ops import attention as _attn
from sadl_layers.ops import dense as _dense

__all__ = ["MultiHeadAttention", "MultiheadAttention", "CausalSelfAttention"]


def _heads(x: Tensor, n_head: int) -> Tensor:
    """(B, T, C) -> (B, H, T, C / H)."""
    B, T, C = x.shape
    return x.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)


def _merge(y: Tensor) -> Tensor:
    """(B, H, T, d) -> (B, T, H * d)."""
    B, H, T, d = y.shape
    return y.transpose(0, 2, 1, 3).reshape(B, T, H * d)


def _attention_dropout(drop: Dropout, shape: tuple[int, ...], like: Tensor) -> Any:
    """A scaled keep-mask for the attention probabilities (on ``like``'s device, in its dtype),
    or None when no dropout applies.
    """
    if not drop.training or drop.p == 0.0:
        return None
    scale = 1.0 / (1.0 - drop.p) if drop.p < 1.0 else 0.0
    mask = drop.keep_mask(shape, like.device).astype(like.dtype)
    mask *= scale  # in place: stays in the input's dtype
    return mask


class MultiHeadAttention(Layer):
    """Multi-head attention with batch-first inputs: ``mha(query, key=None, value=None)``.

    Parameters follow ``torch.nn.MultiheadAttention`` (``in_proj_weight`` (3E, E),
    ``in_proj_bias`` (3E,), ``out_proj``), so its state_dict loads by name. Differences: inputs
    are ``(B, T, E)`` (torch's ``batch_first=True``), the call returns only the output, and
    ``mask`` follows ``scaled_dot_product_attention`` (boolean True = attend, or an additive
    float mask), the opposite of torch.nn.MultiheadAttention's boolean ``attn_mask``.
    ``dropout`` applies to the attention probabilities in training mode.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        self.embed_dim = check_count("MultiHeadAttention", "embed_dim", embed_dim)
        self.num_heads = check_count("MultiHeadAttention", "num_heads", num_heads)
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"MultiHeadAttention: embed_dim={embed_dim} must be divisible by "
                f"num_heads={num_heads}"
            )
        E = self.embed_dim
        gen = resolve_generator(rng)
        bound = math.sqrt(6.0 / (E + 3 * E))  # Xavier-uniform, as torch initializes in_proj
        self.in_proj_weight = Parameter(gen.uniform(-bound, bound, (3 * E, E)).astype(dtype))
        self.in_proj_bias = Parameter(np.zeros(3 * E, dtype=dtype)) if bias else None
        self.out_proj = Linear(E, E, bias=bias, rng=gen, dtype=dtype)
        if self.out_proj.bias is not None:
            self.out_proj.bias.data[...] = 0.0
        self.attn_dropout = Dropout(dropout, rng=None if rng is None else gen)

    def forward(
        self,
        query: Any,
        key: Any = None,
        value: Any = None,
        *,
        mask: Any = None,
        causal: bool = False,
    ) -> Tensor:
        """Attend from ``query`` (B, Tq, E) to ``key`` (B, Tk, E) / ``value`` (B, Tk, E).

        With ``key`` and ``value`` left out (or the very same tensor as ``query``) it is
        self-attention, computed on one packed projection.
        """
        self_attention = (key is None and value is None) or (key is query and value is query)
        q_in = self._check("query", as_tensor(query))
        E, H = self.embed_dim, self.num_heads
        if mask is not None and not isinstance(mask, Tensor) and not is_array(mask):
            # A Tensor mask goes to the op as is, never silently detached here (a float one
            # that requires grad, a learned bias, gets its gradient). A device array stays
            # where it is; the op copies a host mask to the inputs' device.
            mask = np.asarray(mask)
        learned = isinstance(mask, Tensor) and mask.requires_grad  # the packed op takes none
        if self_attention and not learned:
            B, T, _ = q_in.shape
            qkv = self.call_op(_dense.linear, q_in, self.in_proj_weight, self.in_proj_bias)
            dm = _attention_dropout(self.attn_dropout, (B, H, T, T), q_in)
            y = self.call_op(
                _attn.attention_qkv, qkv, n_head=H, causal=causal, mask=mask, dropout_mask=dm
            )
        else:
            k_in = self._check("key", as_tensor(query if key is None else key))
            v_in = self._check("value", as_tensor(k_in if value is None else value))
            if v_in.shape[:2] != k_in.shape[:2] or k_in.shape[0] != q_in.shape[0]:
                raise self.fail(
                    f"key {k_in.shape} and value {v_in.shape} must share (B, Tk) and the batch "
                    f"size of query {q_in.shape}"
                )
            w, b = self.in_proj_weight, self.in_proj_bias
            projected = [
                _heads(
                    self.call_op(
                        _dense.linear,
                        x,
                        w[i * E : (i + 1) * E],
                        None if b is None else b[i * E : (i + 1) * E],
                    ),
                    H,
                )
                for i, x in enumerate((q_in, k_in, v_in))
            ]
            q, k, v = projected
            dm = _attention_dropout(
                self.attn_dropout, (q.shape[0], H, q.shape[2], k.shape[2]), q_in
            )
            y = _merge(
                self.call_op(
                    _attn.scaled_dot_product_attention,
                    q,
                    k,
                    v,
                    causal=causal,
                    mask=mask,
                    dropout_mask=dm,
                )
            )
        out: Tensor = self.out_proj(y)
        return out

    def _check(self, name: str, x: Tensor) -> Tensor:
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise self.fail(f"{name} has shape {x.shape}, expected (B, T, {self.embed_dim})")
        return x

    def extra_repr(self) -> str:
        """Sizes."""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


class MultiheadAttention(MultiHeadAttention):
    """``torch.nn.MultiheadAttention`` as torch spells it: its arguments, masks and results.

    ``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, ..., batch_first=False)``;
    ``mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(output, weights)`` (weights None
    unless ``need_weights``). Inputs are ``(L, N, E)`` unless ``batch_first``. As in torch, a
    boolean ``attn_mask`` or ``key_padding_mask`` is True where attention is NOT allowed and a
    float one is added to the scores. Parameters (``in_proj_weight``, ``in_proj_bias``,
    ``out_proj``) are :class:`MultiHeadAttention`'s, so torch's state_dict loads by name.
    ``add_bias_kv``, ``add_zero_attn`` and ``kdim``/``vdim`` other than ``embed_dim`` raise.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        rng: np.random.Generator | int | None = None,
    ) -> None:
        if (
            add_bias_kv
            or add_zero_attn
            or kdim not in (None, embed_dim)
            or vdim
            not in (
                None,
                embed_dim,
            )
        ):
            raise NotImplementedError(
                "MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim other than "
                "embed_dim are not supported"
            )
        super().__init__(embed_dim, num_heads, bias, dropout, rng=rng, dtype=dtype)
        self.batch_first = bool(batch_first)
        if device is not None:
            self.to(device)

    def forward(  # type: ignore[override]
        self,
        query: Any,
        key: Any,
        value: Any,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """``(output, averaged or per-head attention weights or None)``, as torch's."""
        q, k, v = (as_tensor(t) for t in (query, key, value))
        if not self.batch_first:
            q, k, v = (t.transpose(1, 0, 2) for t in (q, k, v))
        N, L, E = q.shape
        S, H = k.shape[1], self.num_heads
        bias = _additive_mask(attn_mask, key_padding_mask, (N, H, L, S), q.dtype, is_causal)
        w, b = self.in_proj_weight, self.in_proj_bias
        qh, kh, vh = (
            _heads(
                _dense.linear(x, w[i * E : (i + 1) * E], None if b is None else b[i * E :][:E]), H
            )
            for i, x in enumerate((q, k, v))
        )
        scores = (qh @ kh.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(E // H))
        probs = (scores if bias is None else scores + bias).softmax(axis=-1)
        dm = _attention_dropout(self.attn_dropout, probs.shape, q)
        if dm is not None:
            probs = probs * dm
        out: Tensor = self.out_proj(_merge(probs @ vh))
        if not self.batch_first:
            out = out.transpose(1, 0, 2)
        if not need_weights:
            return out, None
        return out, (probs.mean(axis=1) if average_attn_weights else probs)


def _additive_mask(
    attn_mask: Any, key_padding_mask: Any, shape: tuple[int, ...], dtype: Any, causal: bool
) -> Any:
    """The masks of torch's MultiheadAttention as one additive float mask (N, H, L, S), or None."""
    N, H, L, S = shape
    total = None
    masks = [(attn_mask, None), (key_padding_mask, (N, 1, 1, S))]
    if causal and attn_mask is None:
        masks[0] = (~np.tril(np.ones((L, S), dtype=bool)), None)
    for mask, layout in masks:
        if mask is None:
            continue
        m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
        if m.dtype == bool:
            m = np.where(m, -np.inf, 0.0).astype(dtype)
        if layout is not None:
            m = m.reshape(layout)
        elif m.ndim == 3:
            m = m.reshape(N, H, L, S)  # torch's (N * num_heads, L, S)
        total = m if total is None else total + m
    return total


class CausalSelfAttention(Layer):
    """GPT-2's causal self-attention: ``c_attn`` (n_embd -> 3 n_embd), heads, ``c_proj``.

    ``attn(x)`` maps ``(B, T, n_embd)`` to the same shape; position ``t`` attends to ``0..t``.
    For generation pass a ``cache``: a dict, to which the layer appends this call's keys and
    values, or an object whose ``store(k, v)`` keeps them and returns every key and value so far
    (a preallocated cache such as sadl-models' ``KVCache.slot(layer)``); the new queries attend
    to everything cached (the causal mask is aligned to the end), so feeding one token at a time
    gives the same result as the full sequence. ``dropout`` applies to the attention
    probabilities and to the output (training mode); the dropout masks draw from
    ``dropout_rng`` when it is given, else from ``rng``'s generator (or sadl's default one).
    """

    def __init__(
        self,
        n_embd: int,
        n_head: int,
        bias: bool = True,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | int | None = None,
        dropout_rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        self.n_embd = check_count("CausalSelfAttention", "n_embd", n_embd)
        self.n_head = check_count("CausalSelfAttention", "n_head", n_head)
        if self.n_embd % self.n_head:
            raise ValueError(
                f"CausalSelfAttention: n_embd={n_embd} must be divisible by n_head={n_head}"
            )
        gen = resolve_generator(rng)
        self.c_attn = Linear(self.n_embd, 3 * self.n_embd, bias=bias, rng=gen, dtype=dtype)
        self.c_proj = Linear(self.n_embd, self.n_embd, bias=bias, rng=gen, dtype=dtype)
        drop_rng = dropout_rng if dropout_rng is not None else None if rng is None else gen
        self.attn_dropout = Dropout(dropout, rng=drop_rng)
        self.resid_dropout = Dropout(dropout, rng=drop_rng)
        self.dropout = float(dropout)

    def forward(self, x: Any, cache: Any = None) -> Tensor:
        """Causal self-attention over ``x`` of shape ``(B, T, n_embd)``."""
        x = as_tensor(x)
        if x.ndim != 3 or x.shape[-1] != self.n_embd:
            raise self.fail(f"input has shape {x.shape}, expected (B, T, {self.n_embd})")
        qkv = self.c_attn(x)
        if cache is None:
            B, T, _ = x.shape
            dm = _attention_dropout(self.attn_dropout, (B, self.n_head, T, T), x)
            y = self.call_op(
                _attn.attention_qkv, qkv, n_head=self.n_head, causal=True, dropout_mask=dm
            )
        else:
            y = self._with_cache(qkv, cache)
        out: Tensor = self.resid_dropout(self.c_proj(y))
        return out

    def _with_cache(self, qkv: Tensor, cache: Any) -> Tensor:
        B, T, _ = qkv.shape
        H, hd = self.n_head, self.n_embd // self.n_head
        parts = qkv.reshape(B, T, 3, H, hd).transpose(2, 0, 3, 1, 4)
        q, k, v = parts[0], parts[1], parts[2]
        if not isinstance(cache, dict):  # preallocated: it keeps them and hands back all so far
            k, v = cache.store(k.data, v.data)
            past_k = past_v = None
        else:
            past_k, past_v = cache.get("k"), cache.get("v")
        if past_k is not None and past_v is not None:
            if past_k.shape[:2] != (B, H) or past_k.shape[3] != hd or past_v.shape != past_k.shape:
                raise self.fail(
                    f"cache holds keys {past_k.shape} / values {past_v.shape}, expected "
                    f"(B={B}, n_head={H}, T_past, {hd}) for this input"
                )
            k = cast(Tensor, np.concatenate([past_k, k], axis=2))
            v = cast(Tensor, np.concatenate([past_v, v], axis=2))
        if isinstance(cache, dict):
            cache["k"], cache["v"] = k.data, v.data
        dm = _attention_dropout(self.attn_dropout, (B, H, T, k.shape[2]), qkv)
        y = self.call_op(_attn.scaled_dot_product_attention, q, k, v, causal=True, dropout_mask=dm)
        return _merge(y)

    def extra_repr(self) -> str:
        """Sizes."""
        return f"n_embd={self.n_embd}, n_head={self.n_head}, dropout={self.dropout}"
