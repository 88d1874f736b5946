"""Activation layers, with torch.nn's names and arguments.

Each is one op on the graph: core's ``relu``/``tanh``/``sigmoid``/``softmax``/``log_softmax``,
or this package's ``gelu``, ``silu``, ``mish``, ``softplus_beta``, ``logsigmoid``,
``leaky_relu``, ``elu``/``selu``/``celu``, ``hardtanh``/``hardsigmoid``/``hardswish``,
``softmin``, ``quick_gelu`` and ``softsign``.
"""

from __future__ import annotations

from typing import Any

import sadl
from sadl import Tensor

from sadl_layers.modules._base import Layer, as_tensor
from sadl_layers.ops import activations as _ops
from sadl_layers.ops import piecewise as _piecewise
from sadl_layers.ops import tensor_ops as _tensor_ops


def _activate(layer: Layer, op: Any, x: Any, **params: Any) -> Tensor:
    """``op`` on ``x``, written into ``x`` when the layer was made with ``inplace=True`` (torch's
    in-place activations: ``Tensor.inplace`` records them on the graph as torch does).
    """
    if not getattr(layer, "inplace", False):
        out: Tensor = layer.call_op(op, as_tensor(x), **params)
        return out
    if not isinstance(x, Tensor):
        raise layer.fail(f"inplace=True overwrites a Tensor, got {type(x).__name__}", TypeError)
    return x.inplace(op, **params)


class _InPlace(Layer):
    """An activation torch lets overwrite its input (``inplace=True``)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        """``inplace=True`` when set."""
        return "inplace=True" if self.inplace else ""


__all__ = [
    "ReLU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "Softmax",
    "LogSoftmax",
    "LeakyReLU",
    "ELU",
    "SELU",
    "CELU",
    "Mish",
    "Softplus",
    "LogSigmoid",
    "Hardtanh",
    "ReLU6",
    "Hardsigmoid",
    "Hardswish",
    "Softmin",
    "Softsign",
    "QuickGELU",
]


class ReLU(_InPlace):
    """max(x, 0)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        if self.inplace:
            return _activate(self, sadl.ops.get("relu"), x)
        return as_tensor(x).relu()


class Tanh(Layer):
    """Hyperbolic tangent."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return as_tensor(x).tanh()


class Sigmoid(Layer):
    """Logistic sigmoid 1 / (1 + exp(-x)), stable for any x."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return as_tensor(x).sigmoid()


class GELU(Layer):
    """GELU: x * Phi(x) (``approximate="none"``, torch's default) or the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        out: Tensor = _ops.gelu(as_tensor(x), approximate=self.approximate)
        return out

    def extra_repr(self) -> str:
        """The approximation."""
        return f"approximate={self.approximate!r}"


class SiLU(_InPlace):
    """SiLU (swish): x * sigmoid(x)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return _activate(self, _ops.silu, x)


class LeakyReLU(_InPlace):
    """x for x > 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = float(negative_slope)

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return _activate(self, _piecewise.leaky_relu, x, negative_slope=self.negative_slope)

    def extra_repr(self) -> str:
        """The slope for negative inputs."""
        return f"negative_slope={self.negative_slope}" + (", inplace=True" * self.inplace)


class Softmax(Layer):
    """Softmax along ``dim`` (default: the last axis)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = int(dim)

    def forward(self, x: Any) -> Tensor:
        """Normalize along ``dim``."""
        return self._checked(x).softmax(self.dim)

    def _checked(self, x: Any) -> Tensor:
        t = as_tensor(x)
        if not -max(t.ndim, 1) <= self.dim < max(t.ndim, 1):
            raise self.fail(f"dim={self.dim} is out of range for an input of shape {t.shape}")
        return t

    def extra_repr(self) -> str:
        """The axis."""
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along ``dim`` (default: the last axis), stable for any x."""

    def forward(self, x: Any) -> Tensor:
        """Normalize along ``dim``, in log space."""
        return self._checked(x).log_softmax(self.dim)


class Softmin(Softmax):
    """softmax(-x) along ``dim`` (default: the last axis), as torch.nn.Softmin."""

    def forward(self, x: Any) -> Tensor:
        """Normalize ``-x`` along ``dim``."""
        out: Tensor = self.call_op(_tensor_ops.softmin, self._checked(x), self.dim)
        return out


class Softsign(Layer):
    """x / (1 + |x|), as torch.nn.Softsign (the op ``softsign``)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        out: Tensor = self.call_op(_ops.softsign, as_tensor(x))
        return out


class QuickGELU(Layer):
    """x * sigmoid(1.702 x): CLIP's fast GELU approximation (open_clip's ``QuickGELU``)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        out: Tensor = self.call_op(_tensor_ops.quick_gelu, as_tensor(x))
        return out


class _Pointwise(Layer):
    """An activation that applies one op with fixed keyword arguments (``self.options``)."""

    op: Any

    def __init__(self, inplace: bool = False, **options: float) -> None:
        super().__init__()
        self.options, self.inplace = options, bool(inplace)

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return _activate(self, type(self).op, x, **self.options)

    def extra_repr(self) -> str:
        """The options."""
        shown = [f"{k}={v}" for k, v in self.options.items()]
        return ", ".join(shown + ["inplace=True"] * self.inplace)


class ELU(_Pointwise):
    """x for x > 0, else alpha * (exp(x) - 1)."""

    op = _piecewise.elu

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace, alpha=float(alpha))


class SELU(_Pointwise):
    """scale * ELU(x, alpha) with the self-normalizing constants (alpha 1.6733, scale 1.0507)."""

    op = _piecewise.selu


class CELU(_Pointwise):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha must not be 0."""

    op = _piecewise.celu

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        if alpha == 0:
            raise ValueError("CELU: alpha must not be 0 (it divides the input)")
        super().__init__(inplace, alpha=float(alpha))


class Mish(_Pointwise):
    """x * tanh(softplus(x))."""

    op = _ops.mish


class Softplus(_Pointwise):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (torch's)."""

    op = _ops.softplus_beta

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        if not beta > 0:
            raise ValueError(f"Softplus: beta must be positive, got {beta!r}")
        super().__init__(beta=float(beta), threshold=float(threshold))


class LogSigmoid(_Pointwise):
    """log(sigmoid(x)), finite for any x."""

    op = _ops.logsigmoid


class Hardtanh(_Pointwise):
    """x clipped to [min_val, max_val] (default [-1, 1])."""

    op = _piecewise.hardtanh

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        if not min_val < max_val:
            raise ValueError(
                f"{type(self).__name__}: min_val must be below max_val, got {min_val} and {max_val}"
            )
        self.options = {"min_val": float(min_val), "max_val": float(max_val)}


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        """``inplace=True`` when set."""
        return "inplace=True" if self.inplace else ""


class Hardsigmoid(_Pointwise):
    """0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 in between."""

    op = _piecewise.hardsigmoid


class Hardswish(_Pointwise):
    """x * Hardsigmoid(x)."""

    op = _piecewise.hardswish
