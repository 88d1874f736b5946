"""``Optimizer``: parameter groups, per-parameter state, ``step``, ``zero_grad``, state dicts.

A subclass names its hyperparameters in ``defaults`` and implements ``update(param, grad, state,
group)``, which changes ``param.data`` in place (in the parameter's dtype). The base class owns
the loop, the groups and the bookkeeping, as in torch.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from sadl._grad_mode import enable_grad, no_grad
from sadl._tensor import Parameter, Tensor
from sadl.backends import to_device

__all__ = ["Optimizer"]


def _is_nonnegative_number(value: Any) -> bool:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    number = float(value)
    return math.isfinite(number) and number >= 0


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``.

    ``params`` is an iterable of tensors that require grad, a mapping of names to them (what
    ``model.get_parameters()`` returns), or an iterable of dicts (param groups) with a
    ``"params"`` entry and per-group hyperparameters overriding ``defaults``. Frozen parameters
    (``requires_grad=False``) may be included: they get no gradient and are left alone.
    """

    #: True when ``update`` is elementwise: the same arithmetic on every element, with state
    #: arrays shaped like the parameter and per-group scalars. ``sadl.compile`` may then run it
    #: once over a group's parameters packed into one flat buffer (same results, fewer calls).
    flat_update: bool = False

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params must be an iterable of tensors (e.g. "
                "model.parameters()), not a single tensor"
            )
        items = list(params.values() if isinstance(params, Mapping) else params)
        if not items:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        groups = items if isinstance(items[0], dict) else [{"params": items}]
        for group in groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters."""
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"{type(self).__name__}: a param group is a dict with a 'params' key")
        unknown = sorted(set(group) - set(self.defaults) - {"params", "name"})
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: unknown param group keys {unknown}; known keys are "
                f"{sorted(self.defaults)}"
            )
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{type(self).__name__}: parameter {i} is {type(p).__name__}, not a Tensor"
                )
            if not p.is_leaf or not (p.requires_grad or isinstance(p, Parameter)):
                raise ValueError(
                    f"{type(self).__name__}: parameter {i} (shape {p.shape}) is not a leaf tensor "
                    "that requires grad (nor a frozen Parameter)"
                )
            if id(p) in existing:
                raise ValueError(
                    f"{type(self).__name__}: parameter {i} (shape {p.shape}) appears in more "
                    "than one param group"
                )
            existing.add(id(p))
        full = {**self.defaults, **group, "params": params}
        self.check_hyperparameters(full)
        self.param_groups.append(full)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """Raise ``ValueError`` for a bad hyperparameter (subclasses extend this)."""
        name = type(self).__name__
        for key in ("lr", "weight_decay", "eps"):
            value = group.get(key)
            if value is not None and not _is_nonnegative_number(value):
                what = "learning rate lr" if key == "lr" else key
                raise ValueError(f"{name}: invalid {what}={value!r} (need a finite number >= 0)")
        betas = group.get("betas")
        if betas is not None:
            if not isinstance(betas, tuple | list) or len(betas) != 2:
                raise ValueError(f"{name}: invalid betas={betas!r} (need a pair like (0.9, 0.999))")
            if not all(_is_nonnegative_number(b) and b < 1 for b in betas):
                raise ValueError(f"{name}: invalid betas={betas!r} (need two values in [0, 1))")

    # ------------------------------------------------------------------ stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of every parameter."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    p.grad = p.grad * 0

    def backward(self, loss: Tensor) -> None:
        """Compute the gradients of ``loss`` for the parameters (SADL's API; = loss.backward())."""
        loss.backward()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    if isinstance(grad, Tensor):
                        grad = grad.data
                    state = self.state.get(p)
                    if state is None:
                        state = self.state[p] = {}
                    self.update(p, grad, state, group)
                    p._version[0] += 1
        return loss

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """Change ``param.data`` in place from ``grad`` (subclasses implement this)."""
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {i: {...}}, "param_groups": [...]}`` with parameters as indices, as torch."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append(
                {**{k: copy.deepcopy(v) for k, v in group.items() if k != "params"}, "params": ids}
            )
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {
                        k: v.copy()
                        if hasattr(v, "copy") and hasattr(v, "shape")
                        else copy.deepcopy(v)
                        for k, v in self.state[p].items()
                    }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned (same parameters, same group layout)."""
        groups = state_dict.get("param_groups")
        if not isinstance(groups, list) or len(groups) != len(self.param_groups):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has "
                f"{len(groups) if isinstance(groups, list) else 'no'} param groups, the optimizer "
                f"has {len(self.param_groups)}"
            )
        by_index: dict[int, Tensor] = {}
        for saved, group in zip(groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"{type(self).__name__}.load_state_dict: a param group has "
                    f"{len(saved['params'])} parameters in the state and "
                    f"{len(group['params'])} here"
                )
            for i, p in zip(saved["params"], group["params"]):
                by_index[int(i)] = p
        new_state: dict[Tensor, dict[str, Any]] = {}
        for key, values in state_dict.get("state", {}).items():
            p = by_index.get(int(key))
            if p is None:
                raise ValueError(f"{type(self).__name__}.load_state_dict: unknown parameter {key}")
            restored = {}
            for k, v in values.items():
                if hasattr(v, "shape") and hasattr(v, "dtype"):  # arrays, 0-d ones included
                    if np.ndim(v) > 0 and tuple(v.shape) != p.shape:
                        raise ValueError(
                            f"{type(self).__name__}.load_state_dict: state {k!r} of parameter "
                            f"{key} has shape {tuple(v.shape)}, the parameter {p.shape}"
                        )
                    copied = v.copy() if not isinstance(v, np.generic) else np.asarray(v)
                    restored[k] = to_device(copied, p.device)
                else:
                    restored[k] = copy.deepcopy(v)
            new_state[p] = restored
        for saved, group in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    group[k] = copy.deepcopy(v)
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"  group {i}: {len(group['params'])} params")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join([*lines, ")"])
