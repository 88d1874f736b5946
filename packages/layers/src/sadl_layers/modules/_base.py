"""What every layer of sadl-layers shares: naming errors after the layer, tensors in and out."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sadl
from sadl import Parameter, Tensor
from sadl.nn import Module
from sadl.plugins import OpDef
from sadl.random import resolve_generator

__all__ = [
    "Layer",
    "as_tensor",
    "check_count",
    "init_uniform",
    "param_dtype",
    "resolve_generator",
]


def as_tensor(x: Any) -> Tensor:
    """``x`` itself when it is a Tensor, else a Tensor wrapping it (no gradient)."""
    return x if isinstance(x, Tensor) else Tensor(x)


def check_count(layer: str, name: str, value: Any, *, minimum: int = 1) -> int:
    """A size argument (features, channels, heads): an int of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{layer}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def param_dtype(dtype: Any) -> np.dtype[Any]:
    """The dtype of a new layer's parameters: ``dtype``, else ``sadl.get_default_dtype()``.

    As in torch, ``sadl.set_default_dtype(np.float64)`` makes every layer built afterwards
    float64 without passing ``dtype=`` to each one.
    """
    return sadl.get_default_dtype() if dtype is None else np.dtype(dtype)


def init_uniform(
    rng: np.random.Generator, bound: float, shape: tuple[int, ...], dtype: Any
) -> Parameter:
    """A Parameter drawn from U(-bound, bound) (torch's default init for weights and biases)."""
    return Parameter(rng.uniform(-bound, bound, size=shape).astype(dtype))


def fan_in_bound(fan_in: int) -> float:
    """1 / sqrt(fan_in): Kaiming-uniform with a = sqrt(5), as torch initializes Linear/Conv."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


class Layer(Module):
    """Base class of the layers here: errors raised by an op name the layer that called it."""

    def label(self) -> str:
        """``Name(extra_repr)``, the prefix of every error message of this layer."""
        return f"{type(self).__name__}({self.extra_repr()})"

    def fail(self, message: str, exc_type: type[Exception] = ValueError) -> Exception:
        """An exception whose message starts with this layer's label."""
        return exc_type(f"{self.label()}: {message}")

    def call_op(self, op: OpDef, *args: Any, **params: Any) -> Any:
        """Apply ``op``; a ValueError/TypeError from its argument checks is re-raised with the
        layer's name in front.
        """
        try:
            return op(*args, **params)
        except (ValueError, TypeError) as exc:
            if type(exc) not in (ValueError, TypeError):
                raise
            raise type(exc)(f"{self.label()}: {exc}") from None
