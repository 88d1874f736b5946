"""Activation layers: ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax, LeakyReLU.

Each is one op on the graph (core's ``relu``/``tanh``/``sigmoid``/``softmax``/``log_softmax``,
or this package's fused ``gelu``/``silu``/``leaky_relu``).
"""

from __future__ import annotations

from typing import Any

from sadl import Tensor

from sadl_layers.modules._base import Layer, as_tensor
from sadl_layers.ops import activations as _ops

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "LeakyReLU"]


class ReLU(Layer):
    """max(x, 0)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
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


class SiLU(Layer):
    """SiLU (swish): x * sigmoid(x)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        out: Tensor = _ops.silu(as_tensor(x))
        return out


class LeakyReLU(Layer):
    """x for x > 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        out: Tensor = _ops.leaky_relu(as_tensor(x), negative_slope=self.negative_slope)
        return out

    def extra_repr(self) -> str:
        """The slope for negative inputs."""
        return f"negative_slope={self.negative_slope}"


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
