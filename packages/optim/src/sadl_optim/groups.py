"""``param_groups_for_weight_decay``: the usual two param groups, decay and no decay."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sadl import Module, Tensor

from sadl_optim._checks import check_number

__all__ = ["param_groups_for_weight_decay"]


def param_groups_for_weight_decay(
    model_or_named_params: Module | Mapping[str, Tensor] | Iterable[Any],
    weight_decay: float,
) -> list[dict[str, Any]]:
    """Split parameters into a decayed and a non-decayed param group.

    Parameters with ``ndim >= 2`` (weight matrices, embeddings, convolution kernels) get
    ``weight_decay``; the rest (biases, norm weights and biases, scalars) get 0. Accepts a
    Module, a mapping ``name -> parameter``, an iterable of ``(name, parameter)`` pairs (such as
    ``model.named_parameters()``) or of bare parameters. A parameter listed twice is kept once;
    tensors that do not require grad (frozen) are left out.

    Returns always two groups, in this order::

        [{"params": [...], "weight_decay": weight_decay, "name": "decay"},
         {"params": [...], "weight_decay": 0.0, "name": "no_decay"}]

    Pass them to any optimizer: ``AdamW(param_groups_for_weight_decay(model, 0.1), lr=3e-4)``.
    """
    owner = "param_groups_for_weight_decay"
    weight_decay = check_number(owner, "weight_decay", weight_decay, low=0)
    source: Any = model_or_named_params
    if isinstance(source, Module):
        source = source.named_parameters()
    elif isinstance(source, Mapping):
        source = source.items()
    elif isinstance(source, Tensor):
        source = [source]
    decay: list[Tensor] = []
    no_decay: list[Tensor] = []
    seen: set[int] = set()
    for i, item in enumerate(source):
        param = item
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            param = item[1]
        if not isinstance(param, Tensor):
            raise TypeError(
                f"{owner}: item {i} is a {type(item).__name__}; expected a parameter or a "
                "(name, parameter) pair"
            )
        if id(param) in seen or not param.requires_grad:
            continue
        seen.add(id(param))
        (decay if param.ndim >= 2 else no_decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay, "name": "decay"},
        {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"},
    ]
