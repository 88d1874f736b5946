"""Muon (orthogonalised momentum) and LAMB (layer-wise trust ratio) on core's ``Optimizer``.

``Muon`` follows Keller Jordan's reference implementation (github.com/KellerJordan/Muon,
``muon.py``) with ``torch.optim.Muon``'s signature: Nesterov momentum, then the quintic
Newton–Schulz iteration with coefficients (3.4445, -4.7750, 2.0315) for 5 steps, which maps the
update to (roughly) the nearest semi-orthogonal matrix, scaled by ``sqrt(max(1, rows / cols))``.
The reference and torch iterate in bfloat16; sadl iterates in the parameter's dtype (NumPy has
no bfloat16), so a float64 run matches the reference algorithm to rounding.

``LAMB`` follows You et al. (2019), "Large Batch Optimization for Deep Learning: Training BERT
in 76 minutes", Algorithm 2: an Adam direction (bias-corrected) plus decoupled weight decay,
scaled per parameter by the trust ratio ``||p|| / ||update||``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from sadl import Optimizer, Tensor
from sadl.backends import array_module

from sadl_optim._checks import check_bool, check_int, check_number, is_number
from sadl_optim.optimizers import _buffer, _check_betas

__all__ = ["LAMB", "Muon", "newton_schulz"]

#: Keller Jordan's quintic coefficients (torch.optim.Muon's defaults).
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(g: Any, coefficients: Sequence[float], steps: int, eps: float) -> Any:
    """The quintic Newton–Schulz iteration on a matrix ``g`` (its "zeroth power" U V^T, roughly).

    ``X = g / max(||g||_F, eps)`` (transposed so that it is wide), then ``steps`` times
    ``A = X X^T; X = a X + (b A + c A A) X``, as in the reference implementation.
    """
    a, b, c = (float(v) for v in coefficients)
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    xp = array_module(x)
    x = x / xp.maximum(xp.linalg.norm(x), eps)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


class Muon(Optimizer):
    """``Muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
    ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None)``.

    Per parameter (a matrix; higher-rank weights such as conv filters are flattened to
    ``(shape[0], -1)`` as the reference does): ``B = momentum*B + (1-momentum)*g``; the update is
    ``g + momentum*(B - g)`` with ``nesterov`` (``B`` otherwise); ``O = NS(update)``;
    ``p *= 1 - lr*weight_decay``; ``p -= lr' * O`` with ``lr' = lr * sqrt(max(1, rows/cols))``
    (``adjust_lr_fn=None`` or ``"original"``) or ``0.2 * lr * sqrt(max(rows, cols))``
    (``"match_rms_adamw"``), as ``torch.optim.Muon``. Biases, gains and embeddings belong to
    another optimizer (AdamW), as the reference advises: 0-d and 1-d parameters are refused.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": ns_steps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """Momentum in [0, 1); 3 ns_coefficients; ns_steps in [1, 100); matrices only."""
        group["momentum"] = check_number(
            "Muon", "momentum", group["momentum"], low=0, high=1, high_open=True
        )
        group["nesterov"] = check_bool("Muon", "nesterov", group["nesterov"])
        coefficients = group["ns_coefficients"]
        if (
            not isinstance(coefficients, Sequence)
            or isinstance(coefficients, str)
            or len(coefficients) != 3
            or not all(is_number(c) for c in coefficients)
        ):
            raise ValueError(
                f"Muon: invalid ns_coefficients={coefficients!r} (need three numbers (a, b, c))"
            )
        group["ns_coefficients"] = tuple(float(c) for c in coefficients)
        steps = check_int("Muon", "ns_steps", group["ns_steps"], low=1)
        if steps >= 100:
            raise ValueError(f"Muon: invalid ns_steps={steps} (need fewer than 100)")
        group["ns_steps"] = steps
        if group["adjust_lr_fn"] not in (None, "original", "match_rms_adamw"):
            raise ValueError(
                f"Muon: invalid adjust_lr_fn={group['adjust_lr_fn']!r} (need None, 'original' "
                "or 'match_rms_adamw')"
            )
        for p in group["params"]:
            if p.ndim < 2:
                raise ValueError(
                    f"Muon: a parameter of shape {tuple(p.shape)} is not a matrix; Muon "
                    "orthogonalises matrices (and flattens higher-rank weights), so give biases, "
                    "gains and other vectors to another optimizer such as AdamW"
                )
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One Muon step on ``param.data``."""
        data = param.data
        lr = float(group["lr"])
        momentum = float(group["momentum"])
        buf = _buffer(state, "momentum_buffer", data)
        buf += (1.0 - momentum) * (grad - buf)
        update = grad + momentum * (buf - grad) if group["nesterov"] else buf
        matrix = update.reshape(update.shape[0], -1)
        ortho = newton_schulz(
            matrix, group["ns_coefficients"], group["ns_steps"], float(group["eps"])
        )
        rows, cols = matrix.shape
        if group["adjust_lr_fn"] == "match_rms_adamw":
            adjusted = lr * 0.2 * math.sqrt(max(rows, cols))
        else:
            adjusted = lr * math.sqrt(max(1.0, rows / cols))
        weight_decay = float(group["weight_decay"])
        if weight_decay:
            data *= 1.0 - lr * weight_decay
        data -= (adjusted * ortho.reshape(data.shape)).astype(data.dtype, copy=False)


class LAMB(Optimizer):
    """``LAMB(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0)`` (You et al.).

    ``m = beta1*m + (1-beta1)*g``, ``v = beta2*v + (1-beta2)*g*g``;
    ``r = m / (1-beta1**t) / (sqrt(v / (1-beta2**t)) + eps) + weight_decay * p``;
    ``p -= lr * trust * r`` with ``trust = ||p|| / ||r||`` (1 when either norm is 0).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    def check_hyperparameters(self, group: dict[str, Any]) -> None:
        """lr, eps, weight_decay >= 0; betas in [0, 1)."""
        _check_betas("LAMB", group)
        super().check_hyperparameters(group)

    def update(
        self, param: Tensor, grad: Any, state: dict[str, Any], group: dict[str, Any]
    ) -> None:
        """One LAMB step on ``param.data``."""
        data = param.data
        xp = array_module(data)
        beta1, beta2 = group["betas"]
        step = state["step"] = state.get("step", 0) + 1
        exp_avg = _buffer(state, "exp_avg", data)
        exp_avg_sq = _buffer(state, "exp_avg_sq", data)
        exp_avg *= beta1
        exp_avg += (1.0 - beta1) * grad
        exp_avg_sq *= beta2
        exp_avg_sq += (1.0 - beta2) * (grad * grad)
        denom = xp.sqrt(exp_avg_sq / (1.0 - beta2**step))
        denom += float(group["eps"])
        r = (exp_avg / (1.0 - beta1**step)) / denom
        weight_decay = float(group["weight_decay"])
        if weight_decay:
            r += weight_decay * data
        w_norm, r_norm = float(xp.linalg.norm(data)), float(xp.linalg.norm(r))
        trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
        data -= (float(group["lr"]) * trust) * r
