"""Factories: ``tensor``, ``zeros``, ``ones``, ... with ``dtype=``, ``device=``, ``requires_grad=``.

``tensor``, the one on every user's first line, is defined beside ``Tensor`` (``sadl._tensor``).

Floating factories default to float32 (``sadl.get_default_dtype()``), as in torch. Random
factories draw on the device asked for, from sadl's seeded generator there (``sadl.random``),
unless an explicit NumPy ``rng`` is passed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl import random as _random
from sadl._defaults import get_default_dtype
from sadl._tensor import Tensor, tensor
from sadl.backends import Where, array_module, device_of, is_array, to_device
from sadl.random import Seed

__all__ = [
    "arange",
    "empty",
    "eye",
    "full",
    "linspace",
    "ones",
    "ones_like",
    "rand",
    "randint",
    "randn",
    "tensor",
    "zeros",
    "zeros_like",
]

Shape = Any


def _shape(shape: tuple[Any, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and not isinstance(shape[0], int | np.integer):
        shape = tuple(shape[0])
    out = tuple(int(n) for n in shape)
    if any(n < 0 for n in out):
        raise ValueError(f"negative dimension in shape {out}")
    return out


def _make(array: Any, device: Where, requires_grad: bool) -> Tensor:
    if device is not None:
        array = to_device(array, device)
    return Tensor(array, requires_grad=requires_grad)


def _filled(
    fill: str, shape: tuple[Any, ...], dtype: Any, device: Any, requires_grad: bool
) -> Tensor:
    # array_module(None): the host's module, which a tracer hands out in its thread
    array = getattr(array_module(None), fill)(_shape(shape), dtype or get_default_dtype())
    return _make(array, device, requires_grad)


def zeros(
    *shape: Shape, dtype: Any = None, device: Where = None, requires_grad: bool = False
) -> Tensor:
    """A tensor of zeros.

    >>> import sadl
    >>> sadl.zeros(2, 3).shape
    (2, 3)
    """
    return _filled("zeros", shape, dtype, device, requires_grad)


def ones(
    *shape: Shape, dtype: Any = None, device: Where = None, requires_grad: bool = False
) -> Tensor:
    """A tensor of ones."""
    return _filled("ones", shape, dtype, device, requires_grad)


def empty(
    *shape: Shape, dtype: Any = None, device: Where = None, requires_grad: bool = False
) -> Tensor:
    """An uninitialized tensor."""
    return _filled("empty", shape, dtype, device, requires_grad)


def full(
    shape: Shape,
    fill_value: Any,
    dtype: Any = None,
    device: Where = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor filled with ``fill_value``."""
    if dtype is None and isinstance(fill_value, float):
        dtype = get_default_dtype()
    array = array_module(None).full(_shape((shape,)), fill_value, dtype)
    return _make(array, device, requires_grad)


def eye(
    n: int,
    m: int | None = None,
    k: int = 0,
    dtype: Any = None,
    device: Where = None,
    requires_grad: bool = False,
) -> Tensor:
    """A 2-D tensor with ones on diagonal ``k``."""
    array = array_module(None).eye(n, m, k, dtype=dtype or get_default_dtype())
    return _make(array, device, requires_grad)


def arange(
    start: Any,
    stop: Any = None,
    step: Any = 1,
    dtype: Any = None,
    device: Where = None,
    requires_grad: bool = False,
) -> Tensor:
    """Evenly spaced values in ``[start, stop)`` (integers stay int64, floats become float32)."""
    array = array_module(None).arange(start, stop, step)  # stop None: [0, start)
    if dtype is None and array.dtype == np.float64:
        dtype = get_default_dtype()
    return _make(array if dtype is None else array.astype(dtype), device, requires_grad)


def linspace(
    start: float,
    stop: float,
    num: int = 50,
    dtype: Any = None,
    device: Where = None,
    requires_grad: bool = False,
) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive."""
    array = array_module(None).linspace(start, stop, num, dtype=dtype or get_default_dtype())
    return _make(array, device, requires_grad)


def rand(
    *shape: Shape,
    dtype: Any = None,
    device: Where = None,
    requires_grad: bool = False,
    rng: Seed = None,
) -> Tensor:
    """Uniform samples in ``[0, 1)`` (from ``rng`` or sadl's generator of ``device``)."""
    array = _random.random(_shape(shape), np.float64, device, rng)
    return _make(array.astype(dtype or get_default_dtype()), device, requires_grad)


def randn(
    *shape: Shape,
    dtype: Any = None,
    device: Where = None,
    requires_grad: bool = False,
    rng: Seed = None,
) -> Tensor:
    """Standard normal samples (from ``rng`` or sadl's generator of ``device``)."""
    array = _random.standard_normal(_shape(shape), np.float64, device, rng)
    return _make(array.astype(dtype or get_default_dtype()), device, requires_grad)


def randint(
    low: int, high: int, shape: Shape, dtype: Any = np.int64, device: Where = None, rng: Seed = None
) -> Tensor:
    """Random integers in ``[low, high)`` (from ``rng`` or sadl's generator of ``device``)."""
    array = _random.integers(low, high, _shape((shape,)), dtype, device, rng)
    return _make(array, device, False)


def _like(fill: str, t: Any, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    data = t.data if isinstance(t, Tensor) else t if is_array(t) else np.asarray(t)
    array = getattr(array_module(data), fill)(data, dtype=dtype)
    return _make(array, device if device is not None else device_of(array), requires_grad)


def zeros_like(
    t: Any, dtype: Any = None, device: Where = None, requires_grad: bool = False
) -> Tensor:
    """Zeros with the shape (and by default dtype and device) of ``t``."""
    return _like("zeros_like", t, dtype, device, requires_grad)


def ones_like(
    t: Any, dtype: Any = None, device: Where = None, requires_grad: bool = False
) -> Tensor:
    """Ones with the shape (and by default dtype and device) of ``t``."""
    return _like("ones_like", t, dtype, device, requires_grad)
