"""Shared test helpers: gradient checks of layers (inputs AND parameters) in float64."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import sadl
from sadl.testing import gradcheck, gradgradcheck


def _owner(module: Any, dotted: str) -> tuple[Any, str]:
    *path, attr = dotted.split(".")
    for part in path:
        module = getattr(module, part)
    return module, attr


@contextmanager
def parameters_replaced(layer: Any, names: Sequence[str], values: Sequence[Any]) -> Iterator[None]:
    """Temporarily use ``values`` (Tensors) as the layer's parameters ``names``."""
    saved = []
    for name, value in zip(names, values):
        owner, attr = _owner(layer, name)
        saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)
    try:
        yield
    finally:
        for owner, attr, old in saved:
            setattr(owner, attr, old)


def check_layer(
    layer: Any,
    *inputs: Any,
    second: bool = True,
    before: Callable[[], None] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-3,
) -> None:
    """gradcheck (and gradgradcheck) of ``layer(*inputs)`` w.r.t. inputs and all parameters.

    The layer is cast to float64; float inputs must be float64 arrays. ``before`` runs before
    every evaluation (to reseed a dropout generator, for instance).
    """
    layer.to(dtype=np.float64)
    named = list(layer.named_parameters())
    names = [n for n, _ in named]
    values = [p.data.copy() for _, p in named]
    k = len(inputs)

    def fn(*args: Any) -> Any:
        if before is not None:
            before()
        with parameters_replaced(layer, names, args[k:]):
            return layer(*args[:k])

    gradcheck(fn, *inputs, *values, atol=atol, rtol=rtol)
    if second:
        gradgradcheck(fn, *inputs, *values, atol=atol, rtol=rtol)


def rand(*shape: int, seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    """Uniform float64 test data."""
    return np.random.default_rng(seed).uniform(lo, hi, size=shape)


def grads(fn: Callable[..., Any], *arrays: np.ndarray) -> tuple[Any, list[np.ndarray]]:
    """Output (array) and gradients of sum(fn(...) * fixed weights) w.r.t. each float array."""
    xs = [sadl.Tensor(a, requires_grad=True) if a.dtype.kind == "f" else a for a in arrays]
    out = fn(*xs)
    w = np.random.default_rng(123).uniform(0.5, 1.5, size=out.shape).astype(out.dtype)
    (out * w).sum().backward()
    return out.data, [x.grad for x in xs if isinstance(x, sadl.Tensor)]
