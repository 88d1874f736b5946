"""``flat_optimizer``: an optimizer step as one pass over a flat buffer per parameter group.

An optimizer whose ``update`` is elementwise (``Optimizer.flat_update``: SGD, Adam, AdamW) does
the same arithmetic on every element, so it can run once over all the parameters of a group laid
end to end instead of once per parameter (about ten NumPy calls per parameter become about ten
per group). The pass moves each parameter's data, and each state array of the optimizer (Adam's
moments), into one flat buffer per group: ``param.data`` and ``optimizer.state[param][key]``
become views of it (same values, shapes and dtypes). On every replay the gradients are gathered
into a flat gradient (one call), the optimizer's own ``update`` runs on the flat arrays with the
group's current hyperparameters (learning-rate schedules stay live), and the per-parameter state
(step counts) and version counters are brought up to date, as an eager ``step()`` leaves them.

A group is left per-parameter when its parameters differ in dtype or device, a gradient is
missing, or their states differ (a parameter added later, an AMSGrad buffer on some only). On a
device the flat buffers live on the parameters' device and the backend's own functions gather
the gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sadl.backends import CPU, array_module, device_of, to_device
from sadl.plugins import tensor_from_array as new_tensor
from sadl.plugins import version_counter

from sadl_compile.ir import Graph, Node

__all__ = ["FlatStep", "flat_optimizer"]

_ndarray = np.ndarray
_concatenate = np.concatenate


class _FlatGroup:
    """The flat buffers of one parameter group and the per-parameter views into them."""

    def __init__(self, optimizer: Any, group: dict[str, Any], params: list[Any]) -> None:
        self.group = group
        self.params = params
        self.states = [optimizer.state[p] for p in params]
        first = params[0].data
        where = device_of(first)
        total = sum(p.data.size for p in params)
        # packed already by another trace (two signatures): the same buffers, so each trace's
        # guards on the parameters' arrays keep holding
        self.flat = _packed([p.data for p in params])
        if self.flat is None:
            self.flat = _empty(total, first.dtype, where)
        self.grad = _empty(total, first.dtype, where)
        #: the gradients gathered into ``grad`` by the backend's own concatenate
        self.concatenate = _concatenate if where == CPU else array_module(first).concatenate
        self.array_keys = [k for k, v in self.states[0].items() if _is_array_like(v, first)]
        self.scalar_keys = [k for k in self.states[0] if k not in self.array_keys]
        flats = {}
        for k in self.array_keys:
            packed = _packed([state[k] for state in self.states])
            flats[k] = _empty(total, self.states[0][k].dtype, where) if packed is None else packed
        offset = 0
        for p, state in zip(params, self.states):
            n = p.data.size
            view = self.flat[offset : offset + n].reshape(p.data.shape)
            if not _same_view(view, p.data):
                view[...] = p.data
                p.data = view
            for k in self.array_keys:
                state_view = flats[k][offset : offset + n].reshape(p.data.shape)
                if not _same_view(state_view, state[k]):
                    state_view[...] = state[k]
                    state[k] = state_view
            offset += n
        self.state = {k: self.states[0][k] for k in self.scalar_keys} | flats
        self.param = new_tensor(self.flat)
        self.views = [(st, k, st[k]) for st in self.states for k in self.array_keys]
        self.versions = [version_counter(p) for p in params]
        self.grads_of = tuple(params)

    def in_step(self) -> bool:
        """The parameters' states still agree (step counts) and hold the flat views; the
        group's scalar state is brought up to date from them.
        """
        first = self.states[0]
        for k in self.scalar_keys:
            value = first[k]
            if any(st[k] != value for st in self.states):
                return False
            self.state[k] = value
        return all(st[k] is view for st, k, view in self.views)


def _packed(arrays: list[Any]) -> Any:
    """The flat buffer ``arrays`` are consecutive views of, end to end (None if they are not)."""
    base = getattr(arrays[0], "base", None)
    if base is None or base.ndim != 1 or sum(a.size for a in arrays) != base.size:
        return None
    start = base.__array_interface__["data"][0] if isinstance(base, _ndarray) else None
    offset = 0
    for a in arrays:
        if a.base is not base or not a.flags.c_contiguous:
            return None
        if start is not None and a.__array_interface__["data"][0] != start + offset * a.itemsize:
            return None
        offset += a.size
    return base if start is not None else None


def _same_view(view: Any, array: Any) -> bool:
    """``array`` is already ``view`` (the same memory, shape and dtype)."""
    return (
        isinstance(array, _ndarray)
        and array.base is view.base
        and array.shape == view.shape
        and array.dtype == view.dtype
        and array.__array_interface__["data"][0] == view.__array_interface__["data"][0]
    )


def _empty(n: int, dtype: Any, where: Any) -> Any:
    """An uninitialized 1-d array of ``n`` elements on device ``where``."""
    if where == CPU:
        return np.empty(n, dtype)
    return to_device(np.empty(n, dtype), where)  # every backend can make one on a given device


def _is_array_like(value: Any, data: Any) -> bool:
    """An array like the parameter ``data`` (a moment buffer, not a step count)."""
    return isinstance(value, _ndarray) if type(data) is _ndarray else type(value) is type(data)


def _flattenable(optimizer: Any, params: list[Any]) -> bool:
    """All parameters alike (dtype, array class, device, contiguous) with matching states."""
    if len(params) < 2:
        return False
    first = params[0].data
    kind, where = type(first), device_of(first)
    if kind is not _ndarray and (where == CPU or any(device_of(p.data) != where for p in params)):
        return False  # on the host only plain ndarrays; on a device, all on one device
    states = [optimizer.state.get(p) for p in params]
    if not states[0]:
        return False
    keys = set(states[0])
    for p, state in zip(params, states):
        data = p.data
        if type(data) is not kind or data.dtype != first.dtype or not data.flags.c_contiguous:
            return False
        if not state or set(state) != keys:
            return False
        for k, v in state.items():
            ref = states[0][k]
            if _is_array_like(v, data):
                if v.shape != data.shape or v.dtype != ref.dtype:
                    return False
            elif _is_array_like(ref, data) or v != ref:
                return False
    return True


class FlatStep:
    """Replays an optimizer step: flat groups at once, the rest parameter by parameter."""

    def __init__(
        self, optimizer: Any, flat: list[_FlatGroup], single: list[tuple[Any, dict[str, Any]]]
    ) -> None:
        self.optimizer = optimizer
        self.flat = flat
        self.single = single
        self.state_dict = optimizer.state
        self.group_lists = [(g, g["params"], len(g["params"])) for g in optimizer.param_groups]

    def holds(self) -> bool:
        """The optimizer still has the state and groups the buffers were made from."""
        return self.optimizer.state is self.state_dict and all(
            g["params"] is params and len(params) == n for g, params, n in self.group_lists
        )

    def __call__(self) -> None:
        opt = self.optimizer
        update = opt.update
        for fg in self.flat:
            if not fg.in_step():  # stepped apart since (another trace, an eager call)
                for p in fg.params:
                    update(p, p.grad, opt.state[p], fg.group)
                    version_counter(p)[0] += 1
                continue
            fg.concatenate([p.grad.reshape(-1) for p in fg.params], out=fg.grad)
            update(fg.param, fg.grad, fg.state, fg.group)
            state = fg.state
            for st in fg.states:
                for k in fg.scalar_keys:
                    st[k] = state[k]
            for versions in fg.versions:
                versions[0] += 1
        for p, group in self.single:
            grad = p.grad
            if grad is None:
                continue
            state = opt.state.get(p)
            if state is None:
                state = opt.state[p] = {}
            update(p, grad, state, group)
            version_counter(p)[0] += 1


def flat_optimizer(graph: Graph, context: Any) -> None:
    """Run each optimizer step over flat buffers, one per parameter group where possible."""
    described: list[str] = []
    for node in graph.nodes:
        if node.kind != "optimizer":
            continue
        optimizer = node.meta["optimizer"]
        params = node.meta["params"]
        stepped = {id(p) for p in params}
        flat: list[_FlatGroup] = []
        single: list[tuple[Any, dict[str, Any]]] = []
        for group in optimizer.param_groups:
            members = [p for p in group["params"] if id(p) in stepped]
            if getattr(optimizer, "flat_update", False) and _flattenable(optimizer, members):
                moved = {id(p): p.data for p in members}
                fg = _FlatGroup(optimizer, group, members)
                _rebind(graph, moved, members)
                flat.append(fg)
            else:
                single.extend((p, group) for p in members)
        if not flat:
            continue
        runner = FlatStep(optimizer, flat, single)
        node.meta["runner"] = runner
        node.meta["check"] = (runner.holds, "the optimizer's state or parameter groups changed")
        node.meta["flat"] = True
        sizes = ", ".join(f"{len(fg.params)} params" for fg in flat)
        described.append(f"{node.label}: flat groups of {sizes}")
    if described:
        graph.notes.append("flat_optimizer: " + "; ".join(described))


def _rebind(graph: Graph, moved: dict[int, Any], params: Sequence[Any]) -> None:
    """The parameters' data moved into a flat buffer: captured values follow them."""
    new = {id(old): p.data for p in params if (old := moved.get(id(p))) is not None}
    for v in graph.values:
        if v.entry is not None and v.entry[0] == "data" and id(v.entry[1]) in new:
            v.entry = ("data", new[id(v.entry[1])])
    guards = graph.meta.get("data_guards", [])
    graph.meta["data_guards"] = [(t, new.get(id(a), a)) for t, a in guards]


def optimizer_nodes(graph: Graph) -> list[Node]:
    """The optimizer-step nodes of ``graph``."""
    return [n for n in graph.nodes if n.kind == "optimizer"]
