"""The flat AdamW / Adam / SGD updates as one numba loop over a parameter group's flat buffers.

sadl.compile's ``flat_optimizer`` pass lays each parameter group end to end and calls the
optimizer's own ``update`` on the flat arrays: about ten NumPy calls over the whole group, each
reading and writing full-size arrays. The kernel does the same arithmetic element by element,
with every scalar rounded to the parameters' dtype first, as NumPy does for a Python float
(NEP 50): the result is the same float operations in the same order, **bit for bit equal** to
eager (tested in ``tests/test_kernels_optim.py``, tolerance 0).

An optimizer is recognised by its registered record (``sadl.plugins.records("optimizers")``):
the record named ``Adam``, ``SGD`` (core's) or ``AdamW`` (sadl-optim's) whose class's ``update``
is the optimizer's own ``update`` (a subclass that overrides ``update`` keeps its own; a class
registered under another name is not one of these). A group whose arrays are not plain
float32/float64 host arrays, or whose state is not yet made, runs the optimizer's update.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sadl_kernels._api import Graph, PassContext, records
from sadl_kernels._jit import PER_THREAD, enabled, jit, prange

__all__ = ["KernelUpdate", "flat_kernels", "registered_kind"]

#: The registered optimizer names (``OptimizerDef.name``) whose updates this module reproduces.
UPDATES = {"Adam": "adam", "AdamW": "adamw", "SGD": "sgd"}


def registered_kind(optimizer: Any) -> str | None:
    """``"adam"``, ``"adamw"`` or ``"sgd"`` when ``optimizer``'s ``update`` is the one of the
    optimizer registered under that name; None otherwise.
    """
    update = getattr(type(optimizer), "update", None)
    registered = records("optimizers")
    for name, kind in UPDATES.items():
        record = registered.get(name)
        if record is not None and getattr(record.cls, "update", None) is update:
            return kind
    return None


@jit(per_thread=PER_THREAD)
def _adam(data, grad, m, v, vmax, s):  # type: ignore[no-untyped-def]
    # s: decay, wd, 1-b1, b1, 1-b2, b2, sqrt(bc2), eps, lr/bc1, decoupled, l2, amsgrad
    decay, wd, c1, b1, c2, b2, sbc2, eps, step = (
        s[0],
        s[1],
        s[2],
        s[3],
        s[4],
        s[5],
        s[6],
        s[7],
        s[8],
    )
    decoupled, l2, ams = s[9] != 0, s[10] != 0, s[11] != 0
    for i in prange(data.size):
        p = data[i]
        g = grad[i]
        if decoupled:
            p = p * decay
        if l2:
            g = g + wd * p
        mi = m[i] * b1 + g * c1
        vi = v[i] * b2 + (g * g) * c2
        m[i] = mi
        v[i] = vi
        if ams:
            if vi > vmax[i] or np.isnan(vi):
                vmax[i] = vi
            vi = vmax[i]
        denom = np.sqrt(vi) / sbc2 + eps
        data[i] = p - (mi / denom) * step


@jit(per_thread=PER_THREAD)
def _sgd(data, grad, buf, s):  # type: ignore[no-untyped-def]
    # s: wd, momentum, 1-dampening, lr, l2, nesterov
    wd, mom, damp, lr = s[0], s[1], s[2], s[3]
    l2, nesterov = s[4] != 0, s[5] != 0
    for i in prange(data.size):
        p = data[i]
        g = grad[i]
        if l2:
            g = g + wd * p
        b = buf[i] * mom + damp * g
        buf[i] = b
        step = g + mom * b if nesterov else b
        data[i] = p - lr * step


def _plain(*arrays: Any) -> bool:
    first = arrays[0]
    return all(
        type(a) is np.ndarray
        and a.dtype == first.dtype
        and a.flags.c_contiguous
        and a.shape == first.shape
        for a in arrays
    ) and first.dtype in (np.float32, np.float64)


class KernelUpdate:
    """The optimizer, seen by the flat step, with ``update`` of the flat groups in numba."""

    def __init__(self, optimizer: Any, kind: str, flat_params: list[Any]) -> None:
        self._optimizer = optimizer
        self._kind = kind
        self._flat = {id(p) for p in flat_params}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._optimizer, name)

    def update(self, param: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> None:
        """The kernel for a flat group whose arrays qualify; the optimizer's update otherwise."""
        if id(param) not in self._flat or not self._run(param.data, grad, state, group):
            self._optimizer.update(param, grad, state, group)

    def _run(self, data: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> bool:
        if group.get("maximize"):  # the optimizer's own update negates the gradient
            return False
        if self._kind == "sgd":
            return _run_sgd(data, grad, state, group)
        decoupled = self._kind == "adamw" or bool(group.get("decoupled_weight_decay"))
        return _run_adam(data, grad, state, group, decoupled=decoupled)


def _run_adam(
    data: Any, grad: Any, state: dict[str, Any], group: dict[str, Any], *, decoupled: bool
) -> bool:
    if not state or "exp_avg" not in state:
        return False
    ams = bool(group.get("amsgrad"))
    m, v = state["exp_avg"], state["exp_avg_sq"]
    if ams and "max_exp_avg_sq" not in state:
        return False
    vmax = state["max_exp_avg_sq"] if ams else v
    if not _plain(data, grad, m, v, vmax):
        return False
    lr = float(group["lr"])
    beta1, beta2 = (float(b) for b in group["betas"])
    eps, wd = float(group["eps"]), float(group["weight_decay"])
    state["step"] += 1
    step = state["step"]
    bc1, bc2 = 1.0 - beta1**step, 1.0 - beta2**step
    scalars = np.array(
        [
            1.0 - lr * wd,
            wd,
            1.0 - beta1,
            beta1,
            1.0 - beta2,
            beta2,
            math.sqrt(bc2),
            eps,
            lr / bc1,
            float(decoupled and wd != 0),
            float(not decoupled and wd != 0),
            float(ams),
        ],
        dtype=data.dtype,
    )
    _adam.launch(data.size, data, grad, m, v, vmax, scalars)
    return True


def _run_sgd(data: Any, grad: Any, state: dict[str, Any], group: dict[str, Any]) -> bool:
    momentum = float(group["momentum"])
    buf = state.get("momentum_buffer")
    if not momentum or buf is None or not _plain(data, grad, buf):
        return False
    wd = float(group["weight_decay"])
    scalars = np.array(
        [
            wd,
            momentum,
            1.0 - float(group["dampening"]),
            float(group["lr"]),
            float(wd != 0),
            float(bool(group["nesterov"])),
        ],
        dtype=data.dtype,
    )
    _sgd.launch(data.size, data, grad, buf, scalars)
    return True


def flat_kernels(graph: Graph, context: PassContext) -> None:
    """Run the flat AdamW / Adam / SGD updates of ``flat_optimizer`` as numba kernels."""
    if not enabled("optimizer"):
        return
    replaced: list[str] = []
    for node in graph.nodes:
        runner: Any = node.meta.get("runner") if node.kind == "optimizer" else None
        # flat_optimizer's runner: ``.optimizer`` (called for ``update``) and ``.flat`` (the flat
        # groups, each with its flat ``.param``); anything else is left alone
        optimizer = getattr(runner, "optimizer", None)
        groups = getattr(runner, "flat", None)
        if optimizer is None or groups is None or isinstance(optimizer, KernelUpdate):
            continue
        kind = registered_kind(optimizer)
        if kind is None:
            continue
        params = [fg.param for fg in groups]
        runner.optimizer = KernelUpdate(optimizer, kind, params)
        replaced.append(f"{type(optimizer).__name__} ({len(params)} flat groups)")
    if replaced:
        graph.notes.append("sadl_kernels.optimizer: numba updates for " + ", ".join(replaced))
