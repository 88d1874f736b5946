"""Learning-rate schedules: ``LRScheduler`` and ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
``CosineAnnealingLR``, ``LambdaLR``, ``CosineWithWarmup``, ``LinearWarmup``, ``OneCycle``
(``ReduceLROnPlateau``, driven by a metric, is in ``plateau``).

A schedule is a closed-form function of the step number, ``lr_at(step) -> [lr per param group]``.
Constructing a scheduler records each group's base lr and applies step 0 (as torch does);
``step()`` advances one step and writes ``group["lr"]`` into the optimizer's param groups; call it
once per optimizer step, after ``optimizer.step()``. Because the lr is computed from the step
number and the base lrs, never by multiplying the group's current lr, nothing drifts and a
restored scheduler continues exactly where it stopped.

``state_dict()`` holds only JSON-able values (ints, floats, strings, bools and lists of them), so
it can be stored in a checkpoint's JSON metadata; ``load_state_dict`` restores it and writes the
restored lrs into the optimizer, so the order in which optimizer and scheduler are restored does
not matter.
"""

from __future__ import annotations

import abc
import bisect
import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sadl import Optimizer

from sadl_optim._checks import check_bool, check_int, check_number

__all__ = [
    "CosineAnnealingLR",
    "CosineWithWarmup",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearWarmup",
    "MultiStepLR",
    "OneCycle",
    "StepLR",
]


class LRScheduler(abc.ABC):
    """Base class of the schedules: subclasses implement ``lr_at(step)``.

    Attributes: ``optimizer``, ``base_lrs`` (each group's lr when the scheduler was built, or the
    schedule's own starting lrs), ``last_epoch`` (the step last applied; 0 right after
    construction; torch's name). A subclass lists the attributes that define it in
    ``hyperparameters`` (saved by ``state_dict``) and checks them in ``_validate``.
    """

    #: Attribute names ``state_dict`` saves besides ``last_epoch``, ``base_lrs`` and ``last_lr``.
    hyperparameters: tuple[str, ...] = ()

    def __init__(self, optimizer: Optimizer) -> None:
        name = type(self).__name__
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{name}: optimizer must be a sadl Optimizer (such as sadl.optim.AdamW(...)), "
                f"got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        self._validate()
        self.base_lrs: list[float] = self._initial_lrs()
        self._check_base_lrs(self.base_lrs)
        self.last_epoch = -1
        self._last_lr: list[float] = []
        self.step()

    # ------------------------------------------------------------------ the schedule
    @abc.abstractmethod
    def lr_at(self, step: int) -> list[float]:
        """The lr of each param group at ``step`` (0 is the step applied on construction)."""

    def _validate(self) -> None:  # noqa: B027 (an optional hook)
        """Check (and normalize) the hyperparameter attributes; raise ``ValueError`` if bad."""

    def _initial_lrs(self) -> list[float]:
        """The base lr of each group: the optimizer's current lrs."""
        name = type(self).__name__
        return [
            check_number(name, f"lr of param group {i}", group["lr"], low=0)
            for i, group in enumerate(self.optimizer.param_groups)
        ]

    def _check_base_lrs(self, base_lrs: list[float]) -> None:  # noqa: B027 (an optional hook)
        """Check the hyperparameters against the base lrs (subclasses override)."""

    def _set_groups(self, step: int, lrs: list[float]) -> None:
        """Write ``lrs`` (those of ``step``) into the optimizer's param groups."""
        groups = self.optimizer.param_groups
        if len(groups) != len(lrs):
            raise RuntimeError(
                f"{type(self).__name__}: the optimizer has {len(groups)} param groups but the "
                f"scheduler was built for {len(lrs)}; build the scheduler after adding every "
                "param group"
            )
        for group, lr in zip(groups, lrs):
            group["lr"] = lr

    # ------------------------------------------------------------------ public API
    def step(self) -> None:
        """Advance one step and set each param group's lr to the new value."""
        step = self.last_epoch + 1
        lrs = [float(lr) for lr in self.lr_at(step)]
        self._set_groups(step, lrs)
        self.last_epoch = step
        self._last_lr = lrs

    def get_last_lr(self) -> list[float]:
        """The lrs the last ``step()`` (or the construction) set, one per param group."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state as plain JSON-able values (the optimizer is not included)."""
        state: dict[str, Any] = {
            "scheduler": type(self).__name__,
            "last_epoch": self.last_epoch,
            "base_lrs": list(self.base_lrs),
            "last_lr": list(self._last_lr),
        }
        for key in self.hyperparameters:
            state[key] = copy.deepcopy(getattr(self, key))
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` returned and set the optimizer's lrs to the restored ones."""
        name = type(self).__name__
        where = f"{name}.load_state_dict"
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {type(state_dict).__name__}")
        saved_as = state_dict.get("scheduler", name)
        if saved_as != name:
            raise ValueError(f"{where}: the state was saved by a {saved_as}, not a {name}")
        required = {"last_epoch", "base_lrs", "last_lr", *self.hyperparameters}
        missing = sorted(required - set(state_dict))
        unknown = sorted(set(state_dict) - required - {"scheduler"})
        if missing or unknown:
            raise ValueError(
                f"{where}: the state does not fit this scheduler (missing keys {missing}, "
                f"unknown keys {unknown})"
            )
        groups = len(self.optimizer.param_groups)
        lists = {}
        for key in ("base_lrs", "last_lr"):
            values = state_dict[key]
            if not isinstance(values, Sequence) or len(values) != groups:
                raise ValueError(
                    f"{where}: {key} must be a list of {groups} numbers (one per param group), "
                    f"got {values!r}"
                )
            # Held to what the constructor accepts of an lr: a finite number >= 0.
            lists[key] = [
                check_number(where, f"{key}[{i}]", v, low=0) for i, v in enumerate(values)
            ]
        last_epoch = check_int(where, "last_epoch", state_dict["last_epoch"], low=0)
        before = dict(self.__dict__)
        try:
            for key in self.hyperparameters:
                setattr(self, key, copy.deepcopy(state_dict[key]))
            self._validate()
            self._check_base_lrs(lists["base_lrs"])
        except Exception:
            self.__dict__.update(before)
            raise
        self.base_lrs = lists["base_lrs"]
        self.last_epoch = last_epoch
        self._last_lr = lists["last_lr"]
        self._set_groups(last_epoch, self._last_lr)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.hyperparameters)
        return f"{type(self).__name__}({args}, last_epoch={self.last_epoch})"


class StepLR(LRScheduler):
    """``StepLR(optimizer, step_size, gamma=0.1)``: multiply the lr by ``gamma`` every
    ``step_size`` steps.

    ``lr(t) = base_lr * gamma ** (t // step_size)``. Matches ``torch.optim.lr_scheduler.StepLR``.
    """

    hyperparameters = ("step_size", "gamma")

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer)

    def _validate(self) -> None:
        self.step_size = check_int("StepLR", "step_size", self.step_size, low=1)
        self.gamma = check_number("StepLR", "gamma", self.gamma, low=0, low_open=True)

    def lr_at(self, step: int) -> list[float]:
        """``base_lr * gamma ** (step // step_size)`` for each group."""
        factor = self.gamma ** (step // self.step_size)
        return [base * factor for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``ExponentialLR(optimizer, gamma)``: ``lr(t) = base_lr * gamma ** t``, as torch's."""

    hyperparameters = ("gamma",)

    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        self.gamma = gamma
        super().__init__(optimizer)

    def _validate(self) -> None:
        self.gamma = check_number("ExponentialLR", "gamma", self.gamma, low=0, low_open=True)

    def lr_at(self, step: int) -> list[float]:
        """``base_lr * gamma ** step`` for each group."""
        return [base * self.gamma**step for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``CosineAnnealingLR(optimizer, T_max, eta_min=0.0)``: half a cosine from the base lr
    down to ``eta_min`` over ``T_max`` steps (and back up after, periodically).

    ``lr(t) = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``: the closed form
    of ``torch.optim.lr_scheduler.CosineAnnealingLR`` (torch's recursive update gives the same
    values to rounding).
    """

    hyperparameters = ("T_max", "eta_min")

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer)

    def _validate(self) -> None:
        self.T_max = check_int("CosineAnnealingLR", "T_max", self.T_max, low=1)
        self.eta_min = check_number("CosineAnnealingLR", "eta_min", self.eta_min, low=0)

    def lr_at(self, step: int) -> list[float]:
        """The cosine between each base lr and ``eta_min`` at ``step``."""
        cos = (1.0 + math.cos(math.pi * step / self.T_max)) / 2.0
        return [self.eta_min + (base - self.eta_min) * cos for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """``LambdaLR(optimizer, lr_lambda)``: ``lr(t) = base_lr * lr_lambda(t)``, with one function
    or one per param group, as torch's. The functions are not part of ``state_dict`` (as in
    torch): rebuild the scheduler with them, then load its state.
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Any) -> None:
        self.lr_lambdas = lr_lambda
        super().__init__(optimizer)

    def _validate(self) -> None:
        groups = len(self.optimizer.param_groups)
        fns = self.lr_lambdas
        fns = list(fns) if isinstance(fns, list | tuple) else [fns] * groups
        if len(fns) != groups or not all(callable(f) for f in fns):
            raise ValueError(
                f"LambdaLR: lr_lambda must be a function or a list of {groups} functions (one "
                "per param group)"
            )
        self.lr_lambdas = fns

    def lr_at(self, step: int) -> list[float]:
        """``base_lr * lr_lambda(step)`` for each group."""
        return [base * float(f(step)) for base, f in zip(self.base_lrs, self.lr_lambdas)]


class MultiStepLR(LRScheduler):
    """``MultiStepLR(optimizer, milestones, gamma=0.1)``: multiply the lr by ``gamma`` at each
    milestone step.

    ``lr(t) = base_lr * gamma ** (number of milestones <= t)`` (a milestone listed twice counts
    twice). Matches ``torch.optim.lr_scheduler.MultiStepLR``.
    """

    hyperparameters = ("milestones", "gamma")

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1) -> None:
        self.milestones = milestones
        self.gamma = gamma
        super().__init__(optimizer)

    def _validate(self) -> None:
        milestones = self.milestones
        if not isinstance(milestones, Sequence) or isinstance(milestones, str):
            raise ValueError(
                f"MultiStepLR: milestones must be a list of step numbers, got {milestones!r}"
            )
        self.milestones = sorted(
            check_int("MultiStepLR", "milestone", m, low=0) for m in milestones
        )
        self.gamma = check_number("MultiStepLR", "gamma", self.gamma, low=0, low_open=True)

    def lr_at(self, step: int) -> list[float]:
        """``base_lr * gamma ** bisect_right(milestones, step)`` for each group."""
        factor = self.gamma ** bisect.bisect_right(self.milestones, step)
        return [base * factor for base in self.base_lrs]


class LinearWarmup(LRScheduler):
    """``LinearWarmup(optimizer, warmup_steps)``: ramp the lr linearly up to the base lr.

    ``lr(t) = base_lr * (t + 1) / (warmup_steps + 1)`` for ``t < warmup_steps``, then
    ``base_lr``: the first step uses ``base_lr / (warmup_steps + 1)`` (never exactly 0, so no
    step is wasted), step ``warmup_steps`` is the first at the full base lr.
    ``warmup_steps=0`` keeps the base lr throughout. Equals torch's
    ``LinearLR(start_factor=1/(warmup_steps+1), end_factor=1, total_iters=warmup_steps)``.
    """

    hyperparameters = ("warmup_steps",)

    def __init__(self, optimizer: Optimizer, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps
        super().__init__(optimizer)

    def _validate(self) -> None:
        self.warmup_steps = check_int("LinearWarmup", "warmup_steps", self.warmup_steps, low=0)

    def lr_at(self, step: int) -> list[float]:
        """The warmed-up lr of each group at ``step``."""
        if step >= self.warmup_steps:
            return list(self.base_lrs)
        return [base * (step + 1) / (self.warmup_steps + 1) for base in self.base_lrs]


class CosineWithWarmup(LRScheduler):
    """``CosineWithWarmup(optimizer, warmup_steps, total_steps, min_lr=0.0)``.

    Linear warmup from about 0 to the base lr, then a half cosine down to the floor ``min_lr``
    (an absolute lr, the same for every group), reached at ``total_steps`` and kept after::

        t <  warmup_steps:  lr = base_lr * (t + 1) / (warmup_steps + 1)
        t >= warmup_steps:  p  = min(1, (t - warmup_steps) / (total_steps - warmup_steps))
                            lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2

    The peak ``base_lr`` is at step ``warmup_steps``; ``warmup_steps=0`` starts the cosine at
    step 0. Equivalent to torch's ``LambdaLR`` with ``lr_lambda(t) = lr(t) / base_lr``.
    """

    hyperparameters = ("warmup_steps", "total_steps", "min_lr")

    def __init__(
        self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0
    ) -> None:
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_lr = min_lr
        super().__init__(optimizer)

    def _validate(self) -> None:
        name = "CosineWithWarmup"
        self.warmup_steps = check_int(name, "warmup_steps", self.warmup_steps, low=0)
        self.total_steps = check_int(name, "total_steps", self.total_steps, low=1)
        if self.total_steps <= self.warmup_steps:
            raise ValueError(
                f"{name}: total_steps={self.total_steps} must be greater than "
                f"warmup_steps={self.warmup_steps}"
            )
        self.min_lr = check_number(name, "min_lr", self.min_lr, low=0)

    def _check_base_lrs(self, base_lrs: list[float]) -> None:
        for i, base in enumerate(base_lrs):
            if self.min_lr > base:
                raise ValueError(
                    f"CosineWithWarmup: min_lr={self.min_lr!r} is above the lr {base!r} of param "
                    f"group {i}; min_lr is the absolute floor the cosine decays to (not a ratio)"
                )

    def lr_at(self, step: int) -> list[float]:
        """The lr of each group at ``step`` (formula in the class docstring)."""
        if step < self.warmup_steps:
            return [base * (step + 1) / (self.warmup_steps + 1) for base in self.base_lrs]
        progress = min(1.0, (step - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return [self.min_lr + (base - self.min_lr) * cosine for base in self.base_lrs]


class OneCycle(LRScheduler):
    """The 1cycle policy (Smith & Topin), as ``torch.optim.lr_scheduler.OneCycleLR``.

    ``OneCycle(optimizer, max_lr, total_steps, pct_start=0.3, anneal_strategy="cos",
    div_factor=25.0, final_div_factor=1e4, three_phase=False, cycle_momentum=False,
    base_momentum=0.85, max_momentum=0.95)``

    The lr starts at ``initial = max_lr / div_factor``, rises to ``max_lr`` by step
    ``pct_start * total_steps - 1``, then anneals to ``initial / final_div_factor`` at step
    ``total_steps - 1`` (``three_phase``: back down to ``initial`` first, symmetrically, then to
    the minimum). ``anneal_strategy`` is ``"cos"`` or ``"linear"``. ``max_lr`` is a number or one
    per param group. The optimizer's own lr is ignored, as in torch. Stepping beyond
    ``total_steps`` raises.

    Momentum cycling is supported but off by default (torch's default is on): with
    ``cycle_momentum=True`` the momentum (SGD, RMSprop) or ``betas[0]`` (Adam, AdamW, Lion) moves
    inversely to the lr, between ``max_momentum`` and ``base_momentum``, exactly as in torch.
    """

    hyperparameters = (
        "max_lr",
        "total_steps",
        "pct_start",
        "anneal_strategy",
        "div_factor",
        "final_div_factor",
        "three_phase",
        "cycle_momentum",
        "base_momentum",
        "max_momentum",
    )

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        cycle_momentum: bool = False,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
    ) -> None:
        self.max_lr: Any = max_lr
        self.total_steps = total_steps
        self.pct_start = pct_start
        self.anneal_strategy = anneal_strategy
        self.div_factor = div_factor
        self.final_div_factor = final_div_factor
        self.three_phase = three_phase
        self.cycle_momentum = cycle_momentum
        self.base_momentum: Any = base_momentum
        self.max_momentum: Any = max_momentum
        super().__init__(optimizer)

    def _per_group(self, key: str, high: float | None, high_open: bool) -> list[float]:
        """A number or one per param group (each > 0, or in [0, high)) as a list of floats."""
        value = getattr(self, key)
        groups = len(self.optimizer.param_groups)
        low, low_open = (0.0, True) if high is None else (0.0, False)
        if isinstance(value, Sequence) and not isinstance(value, str):
            if len(value) != groups:
                raise ValueError(
                    f"OneCycle: {key} has {len(value)} values, the optimizer has {groups} param "
                    "groups (give one number, or one per group)"
                )
            return [
                check_number(
                    "OneCycle",
                    f"{key}[{i}]",
                    v,
                    low=low,
                    high=high,
                    low_open=low_open,
                    high_open=high_open,
                )
                for i, v in enumerate(value)
            ]
        v = check_number(
            "OneCycle", key, value, low=low, high=high, low_open=low_open, high_open=high_open
        )
        return [v] * groups

    def _validate(self) -> None:
        name = "OneCycle"
        self.max_lr = self._per_group("max_lr", None, False)
        self.total_steps = check_int(name, "total_steps", self.total_steps, low=1)
        self.pct_start = check_number(name, "pct_start", self.pct_start, low=0, high=1)
        if self.anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"{name}: invalid anneal_strategy={self.anneal_strategy!r} (need 'cos' or 'linear')"
            )
        for key in ("div_factor", "final_div_factor"):
            setattr(self, key, check_number(name, key, getattr(self, key), low=0, low_open=True))
        self.three_phase = check_bool(name, "three_phase", self.three_phase)
        self.cycle_momentum = check_bool(name, "cycle_momentum", self.cycle_momentum)
        self.base_momentum = self._per_group("base_momentum", 1.0, True)
        self.max_momentum = self._per_group("max_momentum", 1.0, True)
        defaults = self.optimizer.defaults
        if self.cycle_momentum and "momentum" not in defaults and "betas" not in defaults:
            raise ValueError(
                f"{name}: cycle_momentum=True needs an optimizer with 'momentum' or 'betas'; "
                f"{type(self.optimizer).__name__} has neither (pass cycle_momentum=False)"
            )

    def _initial_lrs(self) -> list[float]:
        return [m / self.div_factor for m in self.max_lr]

    # ------------------------------------------------------------------ phases
    def _phases(self) -> list[tuple[float, str, str, str, str]]:
        """(end step, lr from, lr to, momentum from, momentum to) per phase, as torch."""
        steps = float(self.pct_start * self.total_steps)
        if self.three_phase:
            return [
                (steps - 1, "initial", "max", "max", "base"),
                (2 * steps - 2, "max", "initial", "base", "max"),
                (self.total_steps - 1, "initial", "min", "max", "max"),
            ]
        return [
            (steps - 1, "initial", "max", "max", "base"),
            (self.total_steps - 1, "max", "min", "base", "max"),
        ]

    def _phase(self, step: int) -> tuple[tuple[float, str, str, str, str], float]:
        """The phase ``step`` falls in and how far through it (0..1) it is."""
        if step > self.total_steps:
            raise ValueError(
                f"OneCycle: tried to step {step} times; total_steps is {self.total_steps} "
                "(build the scheduler with more total_steps)"
            )
        phases = self._phases()
        start = 0.0
        for i, phase in enumerate(phases):
            end = phase[0]
            if step <= end or i == len(phases) - 1:
                # A zero-length phase (pct_start * total_steps == 1) is over at once.
                return phase, ((step - start) / (end - start) if end != start else 1.0)
            start = end
        raise AssertionError("unreachable: the last phase always matches")

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def lr_at(self, step: int) -> list[float]:
        """The lr of each group at ``step`` (0 <= step <= total_steps)."""
        phase, pct = self._phase(step)
        lrs = []
        for base, peak in zip(self.base_lrs, self.max_lr):
            values = {"initial": base, "max": peak, "min": base / self.final_div_factor}
            lrs.append(self._anneal(values[phase[1]], values[phase[2]], pct))
        return lrs

    def momentum_at(self, step: int) -> list[float]:
        """The momentum (or ``betas[0]``) of each group at ``step`` under ``cycle_momentum``."""
        phase, pct = self._phase(step)
        out = []
        for low, high in zip(self.base_momentum, self.max_momentum):
            values = {"base": low, "max": high}
            out.append(self._anneal(values[phase[3]], values[phase[4]], pct))
        return out

    def _set_groups(self, step: int, lrs: list[float]) -> None:
        super()._set_groups(step, lrs)
        if not self.cycle_momentum:
            return
        for group, momentum in zip(self.optimizer.param_groups, self.momentum_at(step)):
            if "betas" in group:
                group["betas"] = (momentum, *group["betas"][1:])
            else:
                group["momentum"] = momentum
