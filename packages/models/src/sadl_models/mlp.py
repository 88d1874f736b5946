"""A multilayer perceptron classifier: Linear layers with an activation between them."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from sadl import Tensor
from sadl.nn import Module
from sadl.random import resolve_generator
from sadl_layers import Dropout, Linear

__all__ = ["MLP"]

_ACTIVATIONS = ("relu", "tanh", "gelu", "sigmoid")


class MLP(Module):
    """``MLP(in_features, out_features, hidden_sizes=(64,), *, activation="relu", dropout=0.0)``.

    ``model(x)`` maps (..., in_features) to logits (..., out_features): ``Linear`` layers named
    ``layers.0``, ``layers.1``, ... with ``activation`` (and dropout, if any) between them.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        hidden_sizes: Sequence[int] = (64,),
        *,
        activation: str = "relu",
        dropout: float = 0.0,
        rng: np.random.Generator | int | None = None,
    ) -> None:
        super().__init__()
        sizes = [in_features, *hidden_sizes, out_features]
        for n in sizes:
            if isinstance(n, bool) or not isinstance(n, int | np.integer) or n <= 0:
                raise ValueError(f"MLP: layer sizes must be positive integers, got {sizes}")
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"MLP: unknown activation {activation!r}; expected one of {', '.join(_ACTIVATIONS)}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MLP: dropout must be in [0, 1), got {dropout!r}")
        gen = resolve_generator(rng)
        self.sizes = [int(n) for n in sizes]
        self.activation = activation
        self.layers = [Linear(a, b, rng=gen) for a, b in itertools.pairwise(sizes)]
        self.dropout = Dropout(dropout, rng=gen) if dropout else None

    def forward(self, x: Any) -> Tensor:
        """Logits for inputs ``x`` (a Tensor or array of shape (..., in_features))."""
        h = x if isinstance(x, Tensor) else Tensor(x, dtype=np.float32)  # device arrays stay
        if h.shape[-1:] != (self.sizes[0],):
            raise ValueError(
                f"MLP: expected inputs with {self.sizes[0]} features in the last axis, got shape "
                f"{tuple(h.shape)}"
            )
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < last:
                h = _activate(h, self.activation)
                if self.dropout is not None:
                    h = self.dropout(h)
        return h

    def extra_repr(self) -> str:
        """Layer sizes and activation."""
        return f"sizes={self.sizes}, activation={self.activation!r}"


def _activate(h: Tensor, name: str) -> Tensor:
    if name == "relu":
        return h.relu()
    if name == "tanh":
        return h.tanh()
    if name == "sigmoid":
        return h.sigmoid()
    from sadl_layers.ops import gelu

    out: Tensor = gelu(h, approximate="tanh")
    return out
