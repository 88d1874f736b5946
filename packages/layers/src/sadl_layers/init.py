"""Parameter initialization in place, with ``torch.nn.init``'s names, arguments and formulas.

Each function fills ``tensor`` (a Parameter or Tensor, on any device, in its own dtype) without
recording a graph and returns it. Random ones take ``generator``: None (sadl's default
generator, seeded by ``sadl.manual_seed``), an int seed or a ``numpy.random.Generator``; draws
are made on the host in float64 and then cast, so a seed gives the same values on every device.
NumPy's streams are not torch's: the same seed gives different numbers than torch, with the
same distribution.

``fan_in``/``fan_out`` follow torch: ``size(1) * receptive field`` and ``size(0) * receptive
field`` for a tensor of at least two axes (so a Linear weight ``(out, in)`` has fan_in ``in``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import array_module
from sadl.random import resolve_generator

__all__ = [
    "calculate_gain",
    "constant_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (torch.nn.init.calculate_gain)."""
    if nonlinearity in (*_LINEAR, "conv_transpose3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, bool) or not isinstance(param, int | float):
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        else:
            slope = float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _target(fn: str, tensor: Any) -> Any:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{fn}: expected a sadl Tensor or Parameter, got {type(tensor).__name__}")
    return tensor.data


def _fill(tensor: Any, values: Any) -> Any:
    """Write host values into the tensor's array (its device, its dtype) in place."""
    data = tensor.data
    data[...] = array_module(data).asarray(np.asarray(values, dtype=data.dtype))
    return tensor


def fans(tensor: Any) -> tuple[int, int]:
    """(fan_in, fan_out) as torch computes them (``_calculate_fan_in_and_fan_out``)."""
    shape = tuple(_target("fans", tensor).shape)
    if len(shape) < 2:
        raise ValueError(
            f"fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
            f"(shape {shape})"
        )
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def uniform_(tensor: Any, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Any:
    """Fill with U(a, b)."""
    data = _target("uniform_", tensor)
    return _fill(tensor, resolve_generator(generator).uniform(a, b, size=data.shape))


def normal_(tensor: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    """Fill with N(mean, std**2)."""
    data = _target("normal_", tensor)
    return _fill(tensor, resolve_generator(generator).normal(mean, std, size=data.shape))


def trunc_normal_(
    tensor: Any,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Any:
    """Fill with N(mean, std**2) truncated to [a, b] (redrawn until inside, exact)."""
    data = _target("trunc_normal_", tensor)
    if not a < b:
        raise ValueError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    rng = resolve_generator(generator)
    out = np.empty(data.size)
    todo = np.arange(data.size)
    while todo.size:
        draw = rng.normal(mean, std, size=todo.size)
        ok = (draw >= a) & (draw <= b)
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    return _fill(tensor, out.reshape(data.shape))


def constant_(tensor: Any, val: float) -> Any:
    """Fill with ``val``."""
    data = _target("constant_", tensor)
    data[...] = val
    return tensor


def ones_(tensor: Any) -> Any:
    """Fill with 1."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Any) -> Any:
    """Fill with 0."""
    return constant_(tensor, 0.0)


def eye_(tensor: Any) -> Any:
    """The identity matrix (a 2-D tensor only), as torch.nn.init.eye_."""
    data = _target("eye_", tensor)
    if data.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got {data.shape}")
    return _fill(tensor, np.eye(*data.shape))


def xavier_uniform_(tensor: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(fn: str, tensor: Any, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{fn}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    if fan == 0:
        raise ValueError(f"{fn}: cannot initialize a tensor with a zero-sized {mode}")
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor: Any,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Any:
    """U(-b, b) with b = sqrt(3) * gain / sqrt(fan) (He et al.), torch's defaults."""
    bound = math.sqrt(3.0) * _kaiming_std("kaiming_uniform_", tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Any,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Any:
    """N(0, std**2) with std = gain / sqrt(fan) (He et al.), torch's defaults."""
    std = _kaiming_std("kaiming_normal_", tensor, a, mode, nonlinearity)
    return normal_(tensor, 0.0, std, generator)
