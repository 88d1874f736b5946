"""Activations and softmax with torch's signatures (``inplace=True`` is refused: sadl makes
new tensors).
"""

from __future__ import annotations

from typing import Any

from sadl import Tensor

from sadl_layers.functional._common import _activate, _op, _t


def relu(input: Any, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return _activate("relu", input, inplace)


def relu6(input: Any, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return _activate("hardtanh", input, inplace, min_val=0.0, max_val=6.0)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """X for x > 0, alpha * (exp(x) - 1) otherwise."""
    return _activate("elu", input, inplace, alpha=alpha)


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return _activate("celu", input, inplace, alpha=alpha)


def selu(input: Any, inplace: bool = False) -> Tensor:
    """Scaled ELU with the self-normalizing constants."""
    return _activate("selu", input, inplace)


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """X for x > 0, negative_slope * x otherwise."""
    return _activate("leaky_relu", input, inplace, negative_slope=negative_slope)


def hardtanh(
    input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """X clipped to [min_val, max_val]."""
    return _activate("hardtanh", input, inplace, min_val=min_val, max_val=max_val)


def gelu(input: Any, approximate: str = "none") -> Tensor:
    """X * Phi(x) (``approximate='tanh'``: GPT-2's tanh form)."""
    return _op("gelu")(_t(input), approximate=approximate)  # type: ignore[no-any-return]


def silu(input: Any, inplace: bool = False) -> Tensor:
    """X * sigmoid(x)."""
    return _activate("silu", input, inplace)


def mish(input: Any, inplace: bool = False) -> Tensor:
    """X * tanh(softplus(x))."""
    return _activate("mish", input, inplace)


def sigmoid(input: Any) -> Tensor:
    """1 / (1 + exp(-x))."""
    return _t(input).sigmoid()


def tanh(input: Any) -> Tensor:
    """Hyperbolic tangent."""
    return _t(input).tanh()


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``)."""
    return _op("softplus_beta")(_t(input), beta=beta, threshold=threshold)  # type: ignore[no-any-return]


def softsign(input: Any) -> Tensor:
    """X / (1 + |x|)."""
    return _op("softsign")(_t(input))  # type: ignore[no-any-return]


def logsigmoid(input: Any) -> Tensor:
    """log(sigmoid(x)), stable for large |x|."""
    return _op("logsigmoid")(_t(input))  # type: ignore[no-any-return]


def hardsigmoid(input: Any, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    return _activate("hardsigmoid", input, inplace)


def hardswish(input: Any, inplace: bool = False) -> Tensor:
    """X * relu6(x + 3) / 6."""
    return _activate("hardswish", input, inplace)


def relu_(input: Tensor) -> Tensor:
    """``relu(input, inplace=True)``."""
    return relu(input, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``elu(input, alpha, inplace=True)``."""
    return elu(input, alpha, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``celu(input, alpha, inplace=True)``."""
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """``selu(input, inplace=True)``."""
    return selu(input, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``leaky_relu(input, negative_slope, inplace=True)``."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``hardtanh(input, min_val, max_val, inplace=True)``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def _softmax_dim(fn: str, dim: int | None, dtype: Any, x: Any) -> tuple[Tensor, int]:
    if dim is None:
        raise TypeError(
            f"F.{fn}: pass dim= (torch's implicit dim is deprecated; sadl does not guess it)"
        )
    t = _t(x)
    return (t if dtype is None else t.astype(dtype)), dim


def softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (cast to ``dtype`` first when given)."""
    t, dim = _softmax_dim("softmax", dim, dtype, input)
    return t.softmax(axis=dim)


def log_softmax(
    input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably."""
    t, dim = _softmax_dim("log_softmax", dim, dtype, input)
    return t.log_softmax(axis=dim)


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """softmax(-x) along ``dim``."""
    t, dim = _softmax_dim("softmin", dim, dtype, input)
    return (-t).softmax(axis=dim)


#: Every function defined here (the names torch.nn.functional gives them).
__all__ = [
    n
    for n, v in list(globals().items())
    if getattr(v, "__module__", None) == __name__ and not n.startswith("_")
]
