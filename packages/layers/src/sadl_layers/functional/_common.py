"""What every ``sadl.nn.functional`` function shares: the op lookup and torch's argument checks."""

from __future__ import annotations

from typing import Any

import sadl
from sadl import Tensor

from sadl_layers.ops import OPS

_OWN = {op.name: op for op in OPS}


def _op(name: str) -> Any:
    """sadl-layers' own op ``name``, else core's (``relu``, ``softmax``, ...)."""
    return _OWN.get(name) or sadl.ops.get(name)


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else sadl.tensor(x)


def _activate(name: str, input: Any, inplace: bool, **params: Any) -> Tensor:
    """The op ``name`` on ``input``; ``inplace``: written into the input tensor and recorded on
    the graph as torch's in-place ops are (``Tensor.inplace``), the input returned.
    """
    if not inplace:
        return _op(name)(_t(input), **params)  # type: ignore[no-any-return]
    if not isinstance(input, Tensor):
        raise TypeError(
            f"{name}(inplace=True) overwrites a Tensor, got {type(input).__name__}; pass a "
            "Tensor or drop inplace="
        )
    return input.inplace(_op(name), **params)


def _no_inplace(fn: str, inplace: bool) -> None:
    if inplace:
        raise NotImplementedError(
            f"F.{fn}(inplace=True): sadl's activations make a new tensor; drop inplace= "
            "(the result is the same)"
        )


def _legacy(fn: str, size_average: Any, reduce: Any) -> None:
    if size_average is not None or reduce is not None:
        raise TypeError(
            f"F.{fn}: size_average= and reduce= are deprecated in torch and not accepted here; "
            "pass reduction='mean', 'sum' or 'none'"
        )


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
