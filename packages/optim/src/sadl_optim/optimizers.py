"""AdamW, RMSprop, Adagrad, Adadelta and Lion on core's ``Optimizer`` base.

Each class names its hyperparameters (the ``defaults``), checks them per param group and
implements ``update(param, grad, state, group)``, which changes ``param.data`` in place and in its
dtype. The arithmetic follows ``torch.optim`` (single-tensor path) so trajectories agree to
rounding; Lion follows the published rule (Chen et al., 2023, "Symbolic Discovery of
Optimization Algorithms", Algorithm 2). Per-parameter state holds arrays shaped like the
parameter, plus a Python int ``step`` where the rule needs one, so core's ``state_dict`` /
``load_state_dict`` round-trip it exactly.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sadl import Adam, Optimizer, Tensor
from sadl.backends import array_module, is_array
from sadl.optim import adam_update, torch_options

from sadl_optim._checks import check_bool, check_number, is_number

__all__ = ["Adadelta", "Adagrad", "AdamW", "Lion", "RMSprop"]


def _check_betas(owner: str, group: dict[str, Any]) -> None:
    """``betas`` must be two numbers in [0, 1); stored back as a tuple of floats."""
    betas = group["betas"]
    if (
        not isinstance(betas, Sequence)
        or isinstance(betas, str)
        or len(betas) != 2
        or not all(is_number(b) and 0.0 <= float(b) < 1.0 for b in betas)
    ):
        raise ValueError(f"{owner}: invalid betas={betas!r} (need two numbers in [0, 1))")
    group["betas"] = (float(betas[0]), float(betas[1]))


def _buffer(state: dict[str, Any], key: str, data: Any, fill: float = 0.0) -> Any:
    """The state array ``key``, created as ``full_like(data, fill)`` if missing.

    A 0-d state array that came back from core's ``Optimizer.load_state_dict`` as a Python or
    NumPy scalar is turned back into an array of the parameter's dtype, so in-place updates keep
    working on it.
    """
    buf = state.get(key)
    xp = array_module(data)
    if buf is None:
        buf = state[key] = xp.full_like(data, fill)
    elif isinstance(buf, numbers.Number | np.generic):
        buf = state[key] = xp.asarray(buf, dtype=data.dtype)
    return buf


def _half_in_float32(update: Any, data: Any, grad: Any, state: dict[str, Any], *args: Any) -> None:
    """``update(data, grad, state, *args)`` on a float16 parameter in float32 arithmetic.

    As torch's fused CPU kernel does (``torch.optim.AdamW(..., fused=True)``): the state stays
    float16, as torch keeps it; each step reads it, the parameter and the gradient as float32 and
    rounds the results back once. In float16 itself eps=1e-8 is 0 and a gradient below about
    2e-4 squares to 0, so ``sqrt(v) + eps`` is 0 and the step 0/0: torch's default (for-each)
    AdamW goes NaN there.
    """
    wide = {k: v.astype(np.float32) if is_array(v) else v for k, v in state.items()}
    data32 = data.astype(np.float32)
    update(data32, grad.astype(np.float32), wide, *args)
    data[...] = data32
    for key, value in wide.items():
        if not is_array(value):
            state[key] = value
        elif is_array(state.get(key)):
            state[key][...] = value
        else:
            state[key] = value.astype(data.dtype)


class AdamW(Adam):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False)``.

    Adam with decoupled weight decay (Loshchilov & Hutter): each step first shrinks the
    parameter, ``p *= 1 - lr * weight_decay``, then takes the Adam step on the raw gradient,
    ``p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)`` with
    ``m = beta1*m + (1-beta1)*g`` and ``v = beta2*v + (1-beta2)*g*g``. With ``amsgrad`` the
    running maximum of ``v`` replaces ``v``. Matches ``torch.optim.AdamW``; a float16 parameter
    keeps float16 state but steps in float32 arithmetic, as torch's ``fused=True`` does (see
    :func:`_half_in_float32`). Core's ``Adam`` is the same optimizer with L2 weight decay added
    to the gradient instead.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
            maximize=maximize, foreach=foreach, capturable=capturable,
            differentiable=differentiable, fused=fused,
        )  # fmt: skip

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """lr, eps, weight_decay >= 0; betas in [0, 1); amsgrad a bool."""
        _check_betas("AdamW", group)
        group["amsgrad"] = check_bool("AdamW", "amsgrad", group["amsgrad"])
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One AdamW step on ``param.data`` (core's ``adam_update`` with decoupled decay)."""
        data = param.data
        if data.dtype == np.float16:
            _half_in_float32(_adamw_update, data, grad, state, group)
        else:  # core's rule called directly: this runs once per parameter per step
            adam_update(data, grad, state, group, decoupled_weight_decay=True)


def _adamw_update(data: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> None:
    adam_update(data, grad, state, group, decoupled_weight_decay=True)


class RMSprop(Optimizer):
    """RMSprop (Hinton), as ``torch.optim.RMSprop``.

    ``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False)``:
    ``g += weight_decay * p`` (L2), ``v = alpha*v + (1-alpha)*g*g``; the denominator is
    ``sqrt(v) + eps``, or ``sqrt(v - a*a) + eps`` with ``a = alpha*a + (1-alpha)*g`` when
    ``centered``. Without momentum ``p -= lr * g / denom``; with it ``b = momentum*b + g/denom``
    and ``p -= lr * b``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
            **torch_options(
                "RMSprop", maximize=maximize, foreach=foreach, capturable=capturable,
                differentiable=differentiable,
            ),
        }  # fmt: skip
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """lr, eps, weight_decay, momentum >= 0; alpha in [0, 1); centered a bool."""
        group["alpha"] = check_number(
            "RMSprop", "alpha", group["alpha"], low=0, high=1, high_open=True
        )
        group["momentum"] = check_number("RMSprop", "momentum", group["momentum"], low=0)
        group["centered"] = check_bool("RMSprop", "centered", group["centered"])
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One RMSprop step on ``param.data``."""
        data = param.data
        xp = array_module(data)
        lr = float(group["lr"])
        alpha = float(group["alpha"])
        momentum = float(group["momentum"])
        weight_decay = float(group["weight_decay"])
        state["step"] = state.get("step", 0) + 1
        if weight_decay:
            grad = grad + weight_decay * data
        square_avg = _buffer(state, "square_avg", data)
        square_avg *= alpha
        square_avg += (1.0 - alpha) * (grad * grad)
        if group["centered"]:
            grad_avg = _buffer(state, "grad_avg", data)
            grad_avg += (1.0 - alpha) * (grad - grad_avg)
            avg = xp.sqrt(square_avg - grad_avg * grad_avg)
        else:
            avg = xp.sqrt(square_avg)
        avg += float(group["eps"])
        if momentum > 0:
            buf = _buffer(state, "momentum_buffer", data)
            buf *= momentum
            buf += grad / avg
            data -= lr * buf
        else:
            data -= lr * (grad / avg)


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), as ``torch.optim.Adagrad``.

    ``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10)``:
    ``g += weight_decay * p`` (L2), ``s += g*g`` (``s`` starts at ``initial_accumulator_value``),
    ``p -= lr / (1 + (t-1)*lr_decay) * g / (sqrt(s) + eps)`` at step ``t``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
            **torch_options(
                "Adagrad", maximize=maximize, foreach=foreach, differentiable=differentiable,
                fused=fused,
            ),
        }  # fmt: skip
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """lr, lr_decay, weight_decay, initial_accumulator_value, eps: all >= 0."""
        group["lr_decay"] = check_number("Adagrad", "lr_decay", group["lr_decay"], low=0)
        group["initial_accumulator_value"] = check_number(
            "Adagrad", "initial_accumulator_value", group["initial_accumulator_value"], low=0
        )
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One Adagrad step on ``param.data``."""
        data = param.data
        xp = array_module(data)
        step = state["step"] = state.get("step", 0) + 1
        weight_decay = float(group["weight_decay"])
        if weight_decay:
            grad = grad + weight_decay * data
        clr = float(group["lr"]) / (1.0 + (step - 1) * float(group["lr_decay"]))
        total = _buffer(state, "sum", data, float(group["initial_accumulator_value"]))
        total += grad * grad
        std = xp.sqrt(total)
        std += float(group["eps"])
        data -= clr * (grad / std)


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012), as ``torch.optim.Adadelta``.

    ``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0)``: ``g += weight_decay * p``
    (L2), ``v = rho*v + (1-rho)*g*g``, ``d = sqrt(u + eps) / sqrt(v + eps) * g``,
    ``u = rho*u + (1-rho)*d*d``, ``p -= lr * d`` (``v``, ``u`` start at zero).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            **torch_options(
                "Adadelta", maximize=maximize, foreach=foreach, capturable=capturable,
                differentiable=differentiable,
            ),
        }  # fmt: skip
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """lr, eps, weight_decay >= 0; rho in [0, 1]."""
        group["rho"] = check_number("Adadelta", "rho", group["rho"], low=0, high=1)
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One Adadelta step on ``param.data`` (torch's order of operations)."""
        data = param.data
        xp = array_module(data)
        rho, eps = float(group["rho"]), float(group["eps"])
        weight_decay = float(group["weight_decay"])
        state["step"] = state.get("step", 0) + 1
        if weight_decay:
            grad = grad + weight_decay * data
        square_avg = _buffer(state, "square_avg", data)
        acc_delta = _buffer(state, "acc_delta", data)
        square_avg *= rho
        square_avg += (1.0 - rho) * (grad * grad)
        std = xp.sqrt(square_avg + eps)
        delta = xp.sqrt(acc_delta + eps)
        delta /= std
        delta *= grad
        acc_delta *= rho
        acc_delta += (1.0 - rho) * (delta * delta)
        data -= float(group["lr"]) * delta


class Lion(Optimizer):
    """``Lion(params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0)`` (Chen et al., 2023).

    ``c = beta1*m + (1-beta1)*g``; ``p *= 1 - lr*weight_decay`` (decoupled); ``p -= lr*sign(c)``;
    then ``m = beta2*m + (1-beta2)*g``. Every coordinate moves by exactly ``lr`` (before decay),
    so Lion wants a learning rate 3-10x smaller than AdamW's and a larger weight decay.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """lr, weight_decay >= 0; betas in [0, 1)."""
        _check_betas("Lion", group)
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One Lion step on ``param.data``."""
        data = param.data
        xp = array_module(data)
        lr = float(group["lr"])
        beta1, beta2 = group["betas"]
        weight_decay = float(group["weight_decay"])
        state["step"] = state.get("step", 0) + 1
        exp_avg = _buffer(state, "exp_avg", data)
        if weight_decay:
            data *= 1.0 - lr * weight_decay
        data -= lr * xp.sign(beta1 * exp_avg + (1.0 - beta1) * grad)
        exp_avg *= beta2
        exp_avg += (1.0 - beta2) * grad
