"""Adam (Kingma & Ba), with optional L2 weight decay and AMSGrad, following torch's arithmetic."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sadl._optimizer import Optimizer, Values, torch_options
from sadl._tensor import Tensor
from sadl.backends import array_module

__all__ = ["Adam", "adam_update"]


class Adam(Optimizer):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False)``.

    ``weight_decay`` adds ``weight_decay * param`` to the gradient (L2, as in torch's Adam); for
    decoupled decay use AdamW from sadl-optim (or torch's ``decoupled_weight_decay=True``).
    torch's other switches (``maximize``, ``foreach``, ``fused``, ...) are those of
    :func:`sadl.optim.torch_options`. py-sadl's spellings ``beta_1``, ``beta_2`` and
    ``epsilon`` are accepted for ``betas`` and ``eps``.

    >>> import numpy as np, sadl
    >>> w = sadl.Parameter(np.array([1.0]))
    >>> opt = sadl.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> w.data
    array([0.9])
    """

    flat_update = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
        beta_1: float | None = None,
        beta_2: float | None = None,
        epsilon: float | None = None,
    ) -> None:
        if beta_1 is not None or beta_2 is not None:
            betas = (betas[0] if beta_1 is None else beta_1, betas[1] if beta_2 is None else beta_2)
        if epsilon is not None:
            eps = epsilon
        defaults = {
            "lr": lr,
            "betas": tuple(betas) if isinstance(betas, list | tuple) else betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            **torch_options(
                type(self).__name__, maximize=maximize, foreach=foreach, capturable=capturable,
                differentiable=differentiable, fused=fused,
            ),
        }  # fmt: skip
        if decoupled_weight_decay:  # torch's Adam(decoupled_weight_decay=True) is AdamW
            defaults["decoupled_weight_decay"] = True
        super().__init__(params, defaults)

    def update(self, param: Tensor, grad: Any, state: Values, group: Values) -> None:
        """One Adam step on ``param.data``."""
        decoupled = bool(group.get("decoupled_weight_decay", False))
        adam_update(param._data, grad, state, group, decoupled_weight_decay=decoupled)


def adam_update(
    data: Any, grad: Any, state: Values, group: Values, *, decoupled_weight_decay: bool
) -> None:
    """The Adam update on ``data`` in place (shared with AdamW, which decays ``data`` directly)."""
    xp = array_module(data)
    lr = float(group["lr"])
    beta1, beta2 = group["betas"]
    beta1, beta2 = float(beta1), float(beta2)
    eps = float(group["eps"])
    weight_decay = float(group["weight_decay"])
    if not state:
        state["step"] = 0
        state["exp_avg"] = xp.zeros_like(data)
        state["exp_avg_sq"] = xp.zeros_like(data)
    if group.get("amsgrad") and "max_exp_avg_sq" not in state:
        # From the first step, or from here when amsgrad is switched on mid-training.
        state["max_exp_avg_sq"] = xp.zeros_like(data)
    state["step"] += 1
    step = state["step"]
    if weight_decay:
        if decoupled_weight_decay:
            data *= 1.0 - lr * weight_decay
        else:
            grad = grad + weight_decay * data
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    # torch's arithmetic, with one scratch array instead of a new array per expression:
    # x * c computed into the scratch is the same number as c * x in a fresh array.
    scratch = xp.asarray(xp.multiply(grad, 1.0 - beta1))  # an array even for 0-d parameters
    exp_avg *= beta1
    exp_avg += scratch
    xp.multiply(grad, grad, out=scratch)
    scratch *= 1.0 - beta2
    exp_avg_sq *= beta2
    exp_avg_sq += scratch
    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    second = exp_avg_sq
    if group.get("amsgrad"):
        xp.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
        second = state["max_exp_avg_sq"]
    same = scratch.dtype == second.dtype and scratch.shape == second.shape
    denom = xp.sqrt(second, out=scratch) if same else xp.sqrt(second)
    denom /= math.sqrt(bias_correction2)
    denom += eps
    xp.divide(exp_avg, denom, out=denom)
    denom *= lr / bias_correction1
    data -= denom
