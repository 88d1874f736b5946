"""``ShardedOptimizer``: optimizer state split across ranks, in the style of ZeRO stage 1.

With data parallelism every rank holds the same parameters and (after DDP) the same averaged
gradients, so every rank would compute the very same optimizer step and keep the very same
moments. Instead, each parameter gets one owner rank (sizes balanced greedily): only the owner
keeps its optimizer state and steps it, then every rank receives the owners' new values through
one ``all_gather`` per dtype. Optimizer memory per rank is divided by the world size; the
arithmetic is the wrapped optimizer's own, on the same inputs, so the parameters are bit for bit
those of the unsharded optimizer.

This holds for every optimizer whose update of a parameter depends on that parameter's own
gradient and state only, which is every optimizer of sadl and sadl-optim. (Clip gradients
before ``step()``: every rank has all of them.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import sadl
from sadl.backends import array_module, is_array

from sadl_distributed.collectives import all_gather, broadcast, check_same, gather_bytes
from sadl_distributed.group import ProcessGroup
from sadl_distributed.world import get_group

__all__ = ["ShardedOptimizer", "partition"]


def partition(sizes: Iterable[int], world_size: int) -> list[int]:
    """An owner rank for each parameter size: largest first, each to the least loaded rank."""
    sizes = list(sizes)
    load = [0] * world_size
    owners = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = min(range(world_size), key=lambda r: (load[r], r))
        owners[i] = r
        load[r] += sizes[i]
    return owners


class ShardedOptimizer(sadl.Optimizer):
    """Wrap any sadl optimizer so that each rank keeps and updates only its share of the state.

    ``ShardedOptimizer(AdamW(model.parameters(), lr=3e-4))``: use it as the optimizer itself
    (``step``, ``zero_grad``, ``param_groups``, learning-rate schedulers). Every rank must wrap
    an optimizer over the same parameters. ``step()`` and ``state_dict()`` are collectives:
    every rank calls them together. ``state_dict()`` returns the full, unsharded state (the
    wrapped optimizer's format, loadable without sharding or with another world size);
    ``load_state_dict`` takes such a full state and keeps this rank's share.
    """

    def __init__(self, optimizer: sadl.Optimizer, *, group: ProcessGroup | None = None) -> None:
        if not isinstance(optimizer, sadl.Optimizer) or isinstance(optimizer, ShardedOptimizer):
            raise TypeError(
                f"ShardedOptimizer wraps a sadl Optimizer (such as AdamW(...)), got "
                f"{type(optimizer).__name__}"
            )
        # Optimizer.__init__ is not called: the groups are the wrapped optimizer's own list,
        # so a learning-rate schedule that writes group["lr"] here reaches it.
        self.optimizer = optimizer
        self.defaults = optimizer.defaults
        self.param_groups = optimizer.param_groups
        self.group = group or get_group()
        self._partition()

    @property  # type: ignore[override]
    def state(self) -> dict[sadl.Tensor, dict[str, Any]]:
        """This rank's share of the state: the parameters it owns."""
        return self.optimizer.state

    @state.setter
    def state(self, value: dict[sadl.Tensor, dict[str, Any]]) -> None:
        self.optimizer.state = value
        self._drop_foreign_state()

    def owner_of(self, param: sadl.Tensor) -> int:
        """The rank that keeps ``param``'s state and computes its update."""
        return self._owner[id(param)]

    # ------------------------------------------------------------------ stepping
    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add a group to the wrapped optimizer and share the parameters out again."""
        self.optimizer.add_param_group(group)
        self._partition()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update this rank's parameters with the wrapped optimizer; then share the results."""
        loss = None
        if closure is not None:
            with sadl.enable_grad():
                loss = closure()
        full = self.optimizer.param_groups
        me = self.group.rank
        mine = [{**g, "params": [p for p in g["params"] if self._owner[id(p)] == me]} for g in full]
        self.optimizer.param_groups = mine
        try:
            self.optimizer.step()
        finally:
            self.optimizer.param_groups = full
            for g, m in zip(full, mine):
                g.update((k, v) for k, v in m.items() if k != "params")
        self._share_parameters()
        return loss

    def _partition(self) -> None:
        params = [p for g in self.param_groups for p in g["params"]]
        self._params = params
        check_same(
            "\n".join(f"{tuple(p.shape)} {p.dtype}" for p in params),
            "the optimizer's parameters (their number, order, shapes and dtypes)",
            group=self.group,
        )
        owners = partition([p.size for p in params], self.group.size)
        self._owner = {id(p): r for p, r in zip(params, owners)}
        # One all_gather per (dtype, device): each rank's own parameters end to end, padded
        # to the longest rank's share.
        kinds: dict[tuple[str, str], list[list[sadl.Tensor]]] = {}
        for p, r in zip(params, owners):
            key = (str(p.dtype), str(p.device))
            if key not in kinds:
                kinds[key] = [[] for _ in range(self.group.size)]
            kinds[key][r].append(p)
        self._layout = [
            (shares, max(sum(p.size for p in share) for share in shares))
            for shares in kinds.values()
        ]
        self._drop_foreign_state()

    def _drop_foreign_state(self) -> None:
        me = self.group.rank
        for p in list(self.optimizer.state):
            if self._owner.get(id(p), me) != me:
                del self.optimizer.state[p]

    def _share_parameters(self) -> None:
        """Every rank gets the owners' freshly updated values."""
        if self.group.size == 1:
            return
        me = self.group.rank
        for shares, length in self._layout:
            first = next(p for share in shares for p in share)
            segment = array_module(first.data).zeros(length, dtype=first.dtype)
            offset = 0
            for p in shares[me]:
                segment[offset : offset + p.size] = p.data.reshape(-1)
                offset += p.size
            rows = all_gather(segment, group=self.group)
            with sadl.no_grad():
                for r, share in enumerate(shares):
                    if r == me:
                        continue
                    offset = 0
                    for p in share:
                        p.copy_(rows[r, offset : offset + p.size].reshape(p.shape))
                        offset += p.size

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """The full optimizer state, as the unsharded optimizer would return it (collective)."""
        full = self.gather_state_dict(dst=None)
        assert full is not None
        return full

    def gather_state_dict(self, dst: int | None = 0) -> dict[str, Any] | None:
        """The full state on rank ``dst`` only (None elsewhere), or on every rank for None.

        A collective: every rank calls it. Gathering on one rank keeps the others' memory low.
        """
        local = self.optimizer.state_dict()
        if self.group.size == 1:
            return local
        me = self.group.rank
        arrays: list[Any] = []
        meta = {str(i): _encode_state(entry, arrays) for i, entry in local["state"].items()}
        everyone = gather_bytes(json.dumps(meta).encode(), group=self.group)
        keep = dst is None or dst == me
        state: dict[int, dict[str, Any]] = {}
        for r, text in enumerate(everyone):
            entries = meta if r == me else json.loads(text)
            own_arrays = iter(arrays)
            for index, entry in entries.items():
                param = self._params[int(index)]
                restored = {}
                for key, value in entry.items():
                    if isinstance(value, dict) and "array" in value:
                        dtype, shape = value["array"]
                        xp = array_module(param.data)
                        buffer = next(own_arrays) if r == me else xp.empty(shape, dtype=dtype)
                        broadcast(buffer, r, group=self.group)
                        restored[key] = buffer
                    else:
                        restored[key] = _decode_value(value)
                if keep:
                    state[int(index)] = restored
        if not keep:
            return None
        return {"state": dict(sorted(state.items())), "param_groups": local["param_groups"]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a full state (from ``state_dict()``, or from the unsharded optimizer)."""
        self.optimizer.load_state_dict(state_dict)
        self._drop_foreign_state()


def _encode_state(entry: dict[str, Any], arrays: list[Any]) -> dict[str, Any]:
    """One parameter's state as JSON; its arrays are appended to ``arrays`` (sent separately)."""
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if is_array(value):
            array = array_module(value).ascontiguousarray(value)
            arrays.append(array)
            out[key] = {"array": [array.dtype.str, list(array.shape)]}
        else:
            out[key] = _encode_value(value, key)
    return out


def _encode_value(value: Any, key: str) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, list | tuple):
        return {
            "list" if isinstance(value, list) else "tuple": [_encode_value(v, key) for v in value]
        }
    raise TypeError(
        f"ShardedOptimizer: cannot gather optimizer state {key!r} of type {type(value).__name__} "
        "(arrays, numbers, strings, None and lists/tuples of them are supported)"
    )


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if "float" in value:
            return float(value["float"])
        if "list" in value:
            return [_decode_value(v) for v in value["list"]]
        return tuple(_decode_value(v) for v in value["tuple"])
    return value
