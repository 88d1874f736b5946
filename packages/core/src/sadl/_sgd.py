"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay (torch's rule)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sadl._optimizer import Optimizer, Values, torch_options
from sadl._tensor import Tensor

__all__ = ["SGD"]


class SGD(Optimizer):
    """``SGD(params, lr, momentum=0, nesterov=False, weight_decay=0, dampening=0)``.

    With momentum ``b = momentum * b + (1 - dampening) * g``; the step is ``g + momentum * b``
    (Nesterov) or ``b``. py-sadl's ``friction=f`` is accepted as ``momentum=1 - f``. torch's
    keyword switches (``maximize``, ``foreach``, ``fused``, ...) are those of
    :func:`sadl.optim.torch_options`. The positional order after ``momentum`` is the design's
    (``nesterov`` third), not torch's (``dampening``): pass those by keyword.

    >>> import numpy as np, sadl
    >>> w = sadl.Parameter(np.array([2.0]))
    >>> opt = sadl.SGD([w], lr=0.1, momentum=0.9)
    >>> opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> w.data
    array([1.6])
    """

    flat_update = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
        friction: float | None = None,
    ) -> None:
        if friction is not None:
            if momentum:
                raise TypeError("SGD: give momentum= or py-sadl's friction=, not both")
            if not 0 <= friction <= 1:
                raise ValueError(f"SGD: invalid friction={friction!r} (need a value in [0, 1])")
            momentum = 1.0 - friction
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "nesterov": nesterov,
            "weight_decay": weight_decay,
            "dampening": dampening,
            **torch_options(
                "SGD", maximize=maximize, foreach=foreach, differentiable=differentiable,
                fused=fused,
            ),
        }  # fmt: skip
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: Values) -> None:
        """Momentum must be >= 0; Nesterov needs momentum and no dampening."""
        super().check_hyperparameters(group)
        if group["momentum"] < 0:
            raise ValueError(f"SGD: invalid momentum={group['momentum']!r} (need >= 0)")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov=True needs momentum > 0 and dampening = 0")

    def update(self, param: Tensor, grad: Any, state: Values, group: Values) -> None:
        """One SGD step on ``param.data``."""
        lr = float(group["lr"])
        momentum = float(group["momentum"])
        weight_decay = float(group["weight_decay"])
        if weight_decay:
            grad = grad + weight_decay * param._data
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = grad.copy()
            else:
                buf *= momentum
                buf += (1.0 - float(group["dampening"])) * grad
            grad = grad + momentum * buf if group["nesterov"] else buf
        param._data -= lr * grad
