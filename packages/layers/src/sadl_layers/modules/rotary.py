"""RotaryEmbedding: the rotary position embedding of a query or key (no parameters)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import array_module

from sadl_layers.modules._base import Layer, as_tensor, check_count
from sadl_layers.ops import rotary as _rotary

__all__ = ["RotaryEmbedding"]


class RotaryEmbedding(Layer):
    """Rotate the last axis of ``x`` (..., T, head_dim) by each position's angles.

    ``base`` is the checkpoint's ``rope_theta``; ``interleaved`` picks the pairing (False:
    Hugging Face's rotate-half, True: llama.cpp's adjacent pairs; see
    :mod:`sadl_layers.ops.rotary`). ``forward(x, offset)`` uses positions ``offset ..
    offset + T - 1`` (``offset`` is the length of a KV cache). The tables are computed in
    float64, cast to ``x``'s dtype and kept for the longest length seen.
    """

    def __init__(self, head_dim: int, base: float = 10000.0, interleaved: bool = False) -> None:
        super().__init__()
        self.head_dim = check_count("RotaryEmbedding", "head_dim", head_dim)
        if self.head_dim % 2:
            raise ValueError(f"RotaryEmbedding: head_dim must be even, got {head_dim}")
        if not float(base) > 0:
            raise ValueError(f"RotaryEmbedding: base must be > 0, got {base!r}")
        self.base = float(base)
        self.interleaved = bool(interleaved)
        self._tables: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None = None
        self._cast_tables: tuple[Any, tuple[Any, Any]] | None = None

    def tables(self, stop: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """float64 ``(cos, sin)`` for positions ``0 .. stop - 1`` (grown in doublings)."""
        if self._tables is None or self._tables[0].shape[0] < stop:
            size = max(stop, 2 * (0 if self._tables is None else self._tables[0].shape[0]))
            self._tables = _rotary.rotary_tables(
                self.head_dim, np.arange(size), self.base, interleaved=self.interleaved
            )
        return self._tables

    def _cast(self, stop: int, like: Any) -> tuple[Any, Any]:
        """The tables in ``like``'s dtype and array module (kept: every layer and token reads
        them).
        """
        cos, sin = self.tables(stop)
        key = (type(like), np.dtype(like.dtype), cos.shape[0])
        if self._cast_tables is None or self._cast_tables[0] != key:
            xp = array_module(like)
            cast = (xp.asarray(cos, dtype=like.dtype), xp.asarray(sin, dtype=like.dtype))
            self._cast_tables = (key, cast)
        return self._cast_tables[1]

    def forward(self, x: Any, offset: int = 0) -> Tensor:
        """``x`` rotated for positions starting at ``offset``."""
        x = as_tensor(x)
        if x.ndim < 2 or x.shape[-1] != self.head_dim:
            raise self.fail(f"expected input (..., T, {self.head_dim}), got {tuple(x.shape)}")
        T = x.shape[-2]
        c, s = self._cast(offset + T, x.data)
        c, s = c[offset : offset + T], s[offset : offset + T]
        out: Tensor = self.call_op(_rotary.rotary_embedding, x, c, s, interleaved=self.interleaved)
        return out

    def extra_repr(self) -> str:
        """Width, base and convention."""
        return f"{self.head_dim}, base={self.base}, interleaved={self.interleaved}"
