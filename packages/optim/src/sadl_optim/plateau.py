"""``ReduceLROnPlateau``: lower the learning rate when a metric stops improving.

Unlike the closed-form schedules of :mod:`sadl_optim.schedulers`, its lr depends on the metric
values it was given, so ``step(metric)`` takes one and the state (best value, bad-step count,
cooldown) travels in ``state_dict``. Matches ``torch.optim.lr_scheduler.ReduceLROnPlateau``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sadl import Optimizer

from sadl_optim._checks import check_int, check_number, is_number

__all__ = ["ReduceLROnPlateau"]

_STATE = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch", "last_lr")
_HYPER = ("mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lrs", "eps")


class ReduceLROnPlateau:
    """``ReduceLROnPlateau(optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
    threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8)``.

    ``step(metric)`` after each evaluation: a metric better than the best so far (by more than
    ``threshold``, relative or absolute) resets the count of bad steps; once more than
    ``patience`` bad steps pass, every group's lr becomes ``max(lr * factor, min_lr)`` (changes
    smaller than ``eps`` are skipped) and ``cooldown`` steps are ignored.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                "ReduceLROnPlateau: optimizer must be a sadl Optimizer (such as "
                f"sadl.optim.AdamW(...)), got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        groups = len(optimizer.param_groups)
        if isinstance(min_lr, Sequence) and not isinstance(min_lr, str):
            if len(min_lr) != groups:
                raise ValueError(
                    f"ReduceLROnPlateau: expected {groups} min_lr values (one per param group), "
                    f"got {len(min_lr)}"
                )
            min_lrs = list(min_lr)
        else:
            min_lrs = [min_lr] * groups
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown = threshold, threshold_mode, cooldown
        self.min_lrs: Any = min_lrs
        self.eps = eps
        self._validate()
        self.best = math.inf if self.mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [float(group["lr"]) for group in optimizer.param_groups]

    def _validate(self) -> None:
        name = "ReduceLROnPlateau"
        if self.mode not in ("min", "max"):
            raise ValueError(f"{name}: mode must be 'min' or 'max', got {self.mode!r}")
        if self.threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"{name}: threshold_mode must be 'rel' or 'abs', got {self.threshold_mode!r}"
            )
        self.factor = check_number(name, "factor", self.factor, low=0, high=1, high_open=True)
        self.patience = check_int(name, "patience", self.patience, low=0)
        self.threshold = check_number(name, "threshold", self.threshold, low=0)
        self.cooldown = check_int(name, "cooldown", self.cooldown, low=0)
        self.min_lrs = [check_number(name, "min_lr", v, low=0) for v in self.min_lrs]
        self.eps = check_number(name, "eps", self.eps, low=0)

    def _is_better(self, value: float) -> bool:
        best, t = self.best, self.threshold
        if self.mode == "min":
            return value < (best * (1.0 - t) if self.threshold_mode == "rel" else best - t)
        return value > (best * (1.0 + t) if self.threshold_mode == "rel" else best + t)

    def step(self, metrics: Any) -> None:
        """Record one metric value (a number or a one-element tensor) and lower lrs if due."""
        try:
            value = float(metrics)
        except (TypeError, ValueError):
            raise TypeError(
                "ReduceLROnPlateau.step: pass the metric to watch (a number such as the "
                f"validation loss), got {type(metrics).__name__}"
            ) from None
        self.last_epoch += 1
        if self._is_better(value):
            self.best = value
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, min_lr)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [float(group["lr"]) for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The lrs after the last ``step()`` (or construction), one per param group."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Hyperparameters and progress as plain JSON-able values (infinity as a string)."""
        state: dict[str, Any] = {"scheduler": "ReduceLROnPlateau"}
        for key in _HYPER:
            state[key] = list(self.min_lrs) if key == "min_lrs" else getattr(self, key)
        state.update(
            best=self.best if math.isfinite(self.best) else str(self.best),
            num_bad_epochs=self.num_bad_epochs,
            cooldown_counter=self.cooldown_counter,
            last_epoch=self.last_epoch,
            last_lr=list(self._last_lr),
        )
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what ``state_dict`` returned; the optimizer's lrs become the saved ones."""
        where = "ReduceLROnPlateau.load_state_dict"
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {type(state_dict).__name__}")
        missing = sorted(set(_HYPER + _STATE) - set(state_dict))
        if missing or state_dict.get("scheduler", "ReduceLROnPlateau") != "ReduceLROnPlateau":
            raise ValueError(f"{where}: not a ReduceLROnPlateau state (missing keys {missing})")
        groups = len(self.optimizer.param_groups)
        last_lr = state_dict["last_lr"]
        if not isinstance(last_lr, Sequence) or len(last_lr) != groups:
            raise ValueError(f"{where}: last_lr must hold {groups} numbers, got {last_lr!r}")
        if not isinstance(state_dict["min_lrs"], Sequence) or len(state_dict["min_lrs"]) != groups:
            raise ValueError(f"{where}: min_lrs must hold {groups} numbers")
        before = dict(self.__dict__)
        try:
            for key in _HYPER:
                setattr(self, key, state_dict[key])
            self._validate()
            best = float(state_dict["best"])
            self.num_bad_epochs = check_int(where, "num_bad_epochs", state_dict["num_bad_epochs"])
            self.cooldown_counter = check_int(
                where, "cooldown_counter", state_dict["cooldown_counter"]
            )
            self.last_epoch = check_int(where, "last_epoch", state_dict["last_epoch"])
            lrs = [check_number(where, "last_lr", v, low=0) for v in last_lr]
        except Exception:
            self.__dict__.update(before)
            raise
        if not (is_number(best) or math.isinf(best)):
            raise ValueError(f"{where}: best must be a number, got {state_dict['best']!r}")
        self.best = best
        self._last_lr = lrs
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr

    def __repr__(self) -> str:
        return (
            f"ReduceLROnPlateau(mode={self.mode!r}, factor={self.factor}, "
            f"patience={self.patience}, best={self.best}, last_epoch={self.last_epoch})"
        )
