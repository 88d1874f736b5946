"""``Optimizer``: parameter groups, per-parameter state, ``step``, ``zero_grad``, state dicts.

A subclass names its hyperparameters in ``defaults`` and implements ``update(param, grad, state,
group)``, which changes ``param.data`` in place (in the parameter's dtype). The base class owns
the loop, the groups and the bookkeeping, as in torch.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from sadl._grad_mode import enable_grad, no_grad
from sadl._tensor import Parameter, Tensor
from sadl.backends import current_tracer, is_array, to_device

__all__ = ["Optimizer", "torch_options"]

Values = dict[str, Any]  # a param group, a parameter's state, a state dict: names to values


def _is_finite_number(value: Any) -> bool:
    if not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_):
        return False
    return math.isfinite(float(value))


def _is_nonnegative_number(value: Any) -> bool:
    return _is_finite_number(value) and float(value) >= 0


def _declared_defaults(cls: type) -> Values:
    """The constructor's keyword defaults (``lr=1e-3`` ...): the types a group's values keep."""
    try:
        parameters = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in parameters.items() if p.default is not p.empty}


def _index(key: Any) -> int:
    """A parameter index of a state dict (an int, or its string form from JSON)."""
    if isinstance(key, bool) or not isinstance(key, int | str | np.integer):
        raise ValueError(f"optimizer state: {key!r} is not a parameter index")
    try:
        return int(key)
    except ValueError:
        raise ValueError(f"optimizer state: {key!r} is not a parameter index") from None


def _checked_state_value(where: str, index: Any, name: str, value: Any, param: Tensor) -> Any:
    """A per-parameter state value as the optimizer will use it, or a ``ValueError``.

    Arrays (moments) must be floating, of the parameter's shape, and become copies in its dtype
    on its device; integers (step counts, 0-d integer arrays as torch saves them) must be >= 0.
    """
    what = f"{where}: state {name!r} of parameter {index}"
    if isinstance(value, Tensor):
        value = value.data
    if value is None or isinstance(value, bool | np.bool_):
        return None if value is None else bool(value)
    if isinstance(value, int | np.integer) or (
        is_array(value) and value.ndim == 0 and value.dtype.kind in "iu"
    ):
        count = int(value)
        if count < 0:
            raise ValueError(f"{what} is {count}; counts are >= 0")
        return count
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} is {value}; need a finite number")
        return value
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not is_array(value):
        raise ValueError(
            f"{what} is {type(value).__name__}; optimizer state holds arrays and numbers"
        )
    kinds = "fc" if param.dtype.kind == "c" else "f"
    if value.dtype.kind not in kinds or tuple(value.shape) != param.shape:
        raise ValueError(
            f"{what} is a {value.dtype} array of shape {tuple(value.shape)}; the parameter "
            f"needs a floating array of shape {param.shape}"
        )
    return to_device(value.astype(param.dtype, copy=True), param.device)


def torch_options(owner: str, **flags: bool | None) -> Values:
    """The switches of torch's optimizers (``maximize``, ``foreach``, ``fused``, ``capturable``,
    ``differentiable``), checked, as defaults entries: each optimizer passes those its torch
    namesake has, so its param groups hold the same keys as torch's.

    ``maximize=True`` really maximizes: the base class negates the gradient before ``update``
    (``update`` itself, so a compiled step does too). ``foreach``, ``fused`` and ``capturable``
    choose how torch runs the same arithmetic (loops over tensors, one kernel, CUDA graphs):
    sadl has one implementation, so they change nothing and are accepted. ``differentiable=True``
    (a step that autograd can see through) is refused: sadl's steps run under ``no_grad``.
    """
    unknown = sorted(set(flags) - {"maximize", "foreach", "fused", "capturable", "differentiable"})
    if unknown:
        raise TypeError(f"{owner}: unknown switches {unknown}")
    if flags.get("differentiable"):
        raise ValueError(
            f"{owner}: differentiable=True is not supported (sadl's optimizer steps run under "
            "no_grad and are not recorded); leave it False"
        )
    for key, value in flags.items():
        nullable = key in ("foreach", "fused")
        if not (isinstance(value, bool) or (nullable and value is None)):
            need = "True, False or None" if nullable else "True or False"
            raise ValueError(f"{owner}: invalid {key}={value!r} (need {need})")
    return dict(flags)


def _maximizing(update: Callable[..., None]) -> Callable[..., None]:
    """``update`` that follows ``-grad`` for a group with ``maximize`` (once: a subclass's
    update calling its parent's is not negated twice).
    """

    def wrapper(self: Any, param: Tensor, grad: Any, state: Any, group: Values) -> None:
        if group.get("maximize") and type(self).update is wrapper:
            grad = -grad
        update(self, param, grad, state, group)

    # the update's own name and module: compiler plugins recognise an optimizer by its update
    return functools.update_wrapper(wrapper, update)


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``.

    ``params`` is an iterable of tensors that require grad, a mapping of names to them (what
    ``model.get_parameters()`` returns), or an iterable of dicts (param groups) with a
    ``"params"`` entry and per-group hyperparameters overriding ``defaults``. Frozen parameters
    (``requires_grad=False``) may be included: they get no gradient and are left alone.

    >>> import numpy as np, sadl
    >>> w = sadl.Parameter(np.array([1.0]))
    >>> opt = sadl.SGD([w], lr=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data
    array([0.])
    """

    #: True when ``update`` is elementwise: the same arithmetic on every element, with state
    #: arrays shaped like the parameter and per-group scalars. A compiler (``sadl.compile``) may
    #: run it once over a group's parameters packed into one flat buffer (same results, fewer
    #: calls).
    flat_update: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("update")
        if own is not None:
            cls.update = _maximizing(own)  # type: ignore[method-assign]

    def __init__(self, params: Iterable[Any], defaults: Values) -> None:
        self.defaults = dict(defaults)
        self.state: dict[Tensor, Values] = {}
        self.param_groups: list[Values] = []
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
    def add_param_group(self, group: Values) -> None:
        """Add a group of parameters with its own hyperparameters."""
        name = type(self).__name__
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"{name}: a param group is a dict with a 'params' key")
        unknown = sorted(set(group) - set(self.defaults) - {"params", "name"})
        if unknown:
            raise ValueError(
                f"{name}: unknown param group keys {unknown}; known keys are "
                f"{sorted(self.defaults)}"
            )
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        here: dict[int, int] = {}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} is {type(p).__name__}, not a Tensor")
            if not p.is_leaf or not (p.requires_grad or isinstance(p, Parameter)):
                raise ValueError(
                    f"{name}: parameter {i} (shape {p.shape}) is not a leaf tensor "
                    "that requires grad (nor a frozen Parameter)"
                )
            if id(p) in here:
                raise ValueError(
                    f"{name}: parameter {i} (shape {p.shape}) appears twice in "
                    f"one param group (also as parameter {here[id(p)]}); pass each parameter once"
                )
            if id(p) in existing:
                raise ValueError(
                    f"{name}: parameter {i} (shape {p.shape}) appears in more than one param group"
                )
            here[id(p)] = i
            existing.add(id(p))
        full = {**self.defaults, **group, "params": params}
        self.check_hyperparameters(full)
        self.param_groups.append(full)

    def check_hyperparameters(self, group: Values) -> None:
        """Raise ``ValueError`` for a bad hyperparameter (subclasses extend this).

        The constructor (through ``add_param_group``) and ``load_state_dict`` both call it, so
        a restored hyperparameter is held to what the constructor accepts: ``lr``,
        ``weight_decay`` and ``eps`` finite and >= 0, a hyperparameter whose constructor default
        is a bool stays a bool and one whose default is a number a finite number, ``betas`` a
        pair in [0, 1).
        """
        name = type(self).__name__
        declared = {**self.defaults, **_declared_defaults(type(self))}
        for key in ("lr", "weight_decay", "eps"):
            value = group.get(key)
            # None only where the constructor's default is None, and never for lr
            required = key == "lr" or declared.get(key) is not None
            if (value is not None or required) and not _is_nonnegative_number(value):
                what = "learning rate lr" if key == "lr" else key
                raise ValueError(f"{name}: invalid {what}={value!r} (need a finite number >= 0)")
        for key in self.defaults:  # a flag stays a bool, a number a number
            value, default = group.get(key), declared[key]
            flag = isinstance(default, bool | np.bool_)
            if flag or not isinstance(default, numbers.Real):
                ok = not flag or isinstance(value, bool | np.bool_)
            else:
                ok = _is_finite_number(value)
            if not ok:
                need = "True or False" if flag else "a finite number"
                raise ValueError(f"{name}: invalid {key}={value!r} (need {need})")
        betas = group.get("betas")
        if betas is not None or declared.get("betas") is not None:
            if not isinstance(betas, tuple | list) or len(betas) != 2:
                raise ValueError(f"{name}: invalid betas={betas!r} (need a pair like (0.9, 0.999))")
            if not all(_is_nonnegative_number(b) and b < 1 for b in betas):
                raise ValueError(f"{name}: invalid betas={betas!r} (need two values in [0, 1))")

    # ------------------------------------------------------------------ stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of every parameter."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None if set_to_none or p.grad is None else p.grad * 0

    def backward(self, loss: Tensor) -> None:
        """Compute the gradients of ``loss`` for the parameters (SADL's API; = loss.backward())."""
        loss.backward()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given."""
        if (tracer := current_tracer()) is not None:  # a trace records the step as one call
            return tracer.on_step(self, closure, Optimizer._step)
        return self._step(closure)

    def _step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p._grad  # the slots: a trace records the step whole (on_step)
                    if grad is None:
                        continue
                    grad = grad.data if isinstance(grad, Tensor) else grad
                    self.update(p, grad, self.state.setdefault(p, {}), group)
                    p._version[0] += 1
        return loss

    def update(self, param: Tensor, grad: Any, state: Values, group: Values) -> None:
        """Change ``param.data`` in place from ``grad`` (subclasses implement this)."""
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> Values:
        """``{"state": {i: {...}}, "param_groups": [...]}`` with parameters as indices, as torch."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = [index.setdefault(id(p), len(index)) for p in group["params"]]
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

    def load_state_dict(self, state_dict: Values) -> None:
        """Restore what ``state_dict`` returned (same parameters, same group layout).

        Everything is checked before anything changes: the group layout, each group's keys and
        hyperparameters (with the constructor's own ``check_hyperparameters``), and each state
        value (an array of the parameter's shape and a floating dtype, a count, or a number).
        A bad state dict raises ``ValueError`` and leaves the optimizer as it was.
        """
        where = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {type(state_dict).__name__}")
        groups = state_dict.get("param_groups")
        if not isinstance(groups, list) or len(groups) != len(self.param_groups):
            raise ValueError(
                f"{where}: the state has "
                f"{len(groups) if isinstance(groups, list) else 'no'} param groups, the optimizer "
                f"has {len(self.param_groups)}"
            )
        by_index: dict[int, Tensor] = {}
        merged_groups = []
        for number, (saved, group) in enumerate(zip(groups, self.param_groups)):
            merged_groups.append(self._checked_group(where, number, saved, group, by_index))
        saved_state = state_dict.get("state", {})
        if not isinstance(saved_state, Mapping):
            raise ValueError(f"{where}: 'state' is {type(saved_state).__name__}, not a mapping")
        new_state: dict[Tensor, Values] = {}
        for key, values in saved_state.items():
            p = by_index.get(_index(key))
            if p is None:
                raise ValueError(f"{where}: unknown parameter {key!r}")
            if not isinstance(values, Mapping):
                raise ValueError(f"{where}: the state of parameter {key} is not a mapping")
            new_state[p] = {k: _checked_state_value(where, key, k, v, p) for k, v in values.items()}
        for group, merged in zip(self.param_groups, merged_groups):
            group.update(merged)  # the same dicts: schedulers keep references to them
        self.state = new_state

    def _checked_group(
        self, where: str, number: int, saved: Any, group: Values, by_index: dict[int, Tensor]
    ) -> Values:
        """One saved param group checked like ``add_param_group`` checks a new one."""
        if not isinstance(saved, Mapping) or not isinstance(saved.get("params"), list):
            raise ValueError(f"{where}: param group {number} has no list of 'params'")
        unknown = sorted(set(saved) - set(self.defaults) - {"params", "name"}, key=str)
        if unknown:
            raise ValueError(
                f"{where}: param group {number} has unknown keys {unknown}; known keys are "
                f"{sorted(self.defaults)}"
            )
        ids = saved["params"]
        if len(ids) != len(group["params"]):
            raise ValueError(
                f"{where}: a param group has {len(ids)} parameters in the state and "
                f"{len(group['params'])} here"
            )
        for i, p in zip(ids, group["params"]):
            by_index[_index(i)] = p
        merged = {**group, **{k: copy.deepcopy(v) for k, v in saved.items() if k != "params"}}
        merged["params"] = group["params"]
        try:
            self.check_hyperparameters(merged)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: param group {number}: {exc}") from None
        return merged

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"  group {i}: {len(group['params'])} params")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join([*lines, ")"])
