"""``DistributedDataParallel``: one model replica per rank, gradients averaged during backward.

At wrap time every rank checks that all ranks built the same parameters (names, shapes, dtypes)
and takes rank 0's values. Then, in each backward pass, a post-accumulate-grad hook copies a
parameter's gradient into a flat *bucket* as soon as it is final; a full bucket is all-reduced
at once, without blocking, while the backward pass goes on with the layers below. A callback at
the end of the pass sends what is left, waits, and writes the averaged gradients back. So the
optimizer sees the gradient of the mean loss over every rank's batch, as one process with the
global batch would.

Buckets are sent in a fixed order (bucket 0 first), the same on every rank, which is what MPI
and NCCL need; parameters fill them in reverse definition order, roughly the order backward
reaches them. Each bucket carries one extra number per parameter, 1 where this rank had a
gradient: after the reduction it counts the ranks that had one, so a parameter that no rank used
keeps ``grad = None`` (and the optimizer skips it, as it would in one process), and one used on
some ranks only is averaged over all of them, exactly as one process would compute it.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import sadl
from sadl.backends import array_module, is_array, to_device

from sadl_distributed.collectives import all_reduce, broadcast, gather_bytes
from sadl_distributed.errors import DistributedError, MismatchError
from sadl_distributed.group import ProcessGroup, Work
from sadl_distributed.world import get_group

__all__ = ["DistributedDataParallel", "plan_buckets"]

#: The first bucket is small so that communication starts early in the backward pass.
_FIRST_BUCKET_BYTES = 1 << 20
#: id(parameter) -> the reducer whose hooks it carries (to refuse wrapping a module twice).
_owners: weakref.WeakValueDictionary[int, _Reducer] = weakref.WeakValueDictionary()


class DistributedDataParallel(sadl.Module):
    """Wrap ``module`` so that ``loss.backward()`` leaves gradients averaged over every rank.

    ``DistributedDataParallel(module, bucket_cap_mb=25, group=None)``: call it like the module
    (``ddp(x)`` runs ``module(x)``); give the optimizer ``ddp.parameters()`` (the module's own
    parameters, named ``module.<name>``). Every rank must wrap the same model; rank 0's
    parameter and buffer values are copied to the others here. ``bucket_cap_mb`` is the size of
    the gradient buckets (larger: fewer, larger messages; smaller: communication starts sooner).
    In a world of one process the wrapper does nothing at all.

    Move the module to its device before wrapping it (the buckets are made on that device).
    Gradients are averaged by ``loss.backward()``; ``sadl.grad`` leaves ``.grad`` alone and is
    not averaged.
    """

    def __init__(
        self, module: sadl.Module, *, bucket_cap_mb: float = 25.0, group: ProcessGroup | None = None
    ) -> None:
        if not isinstance(module, sadl.Module):
            raise TypeError(
                f"DistributedDataParallel wraps a sadl Module, got {type(module).__name__}"
            )
        if isinstance(bucket_cap_mb, bool) or not (
            isinstance(bucket_cap_mb, int | float) and bucket_cap_mb > 0
        ):
            raise ValueError(
                f"DistributedDataParallel: bucket_cap_mb must be a positive number, got "
                f"{bucket_cap_mb!r}"
            )
        super().__init__()
        self.module = module
        g = group or get_group()
        named = list(module.named_parameters())
        buffers = list(module.named_buffers())
        _check_same_model(named, buffers, g)
        if g.size > 1:
            works = [broadcast(t, 0, group=g, async_op=True) for _, t in [*named, *buffers]]
            for work in works:
                work.wait()
        self._reducer = _Reducer([p for _, p in named], g, int(bucket_cap_mb * (1 << 20)))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the wrapped module."""
        self._reducer.check_idle()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside this block backward only accumulates gradients locally (no communication).

        For gradient accumulation: run the first micro-batches under ``no_sync()`` and the last
        one outside it; its backward averages the accumulated gradients over every rank.
        """
        before = self._reducer.syncing
        self._reducer.syncing = False
        try:
            yield
        finally:
            self._reducer.syncing = before

    @property
    def group(self) -> ProcessGroup:
        """The process group the gradients are averaged over."""
        return self._reducer.group

    @property
    def bucket_sizes(self) -> list[int]:
        """How many parameters each gradient bucket holds, in the order buckets are sent."""
        return [len(b.indices) for b in self._reducer.buckets]

    def close(self) -> None:
        """Remove the gradient hooks: backward no longer averages over the ranks."""
        self._reducer.close()

    def extra_repr(self) -> str:
        """World size and buckets."""
        return f"world_size={self.group.size}, buckets={len(self._reducer.buckets)}"


def plan_buckets(params: Sequence[sadl.Tensor], cap_bytes: int) -> list[list[int]]:
    """Group parameter indices into buckets of at most ``cap_bytes`` (one parameter may exceed).

    Parameters are taken in reverse order (backward reaches the last layers first); a bucket
    holds one dtype on one device. The first bucket is capped at 1 MiB so that the first
    message leaves early. Deterministic: every rank computes the same plan. Buckets are sent
    strictly in this order, so a parameter that gets no gradient in a pass holds its bucket
    and all later ones back until the pass ends (define rarely used parameters first, so that
    they land in the last bucket).
    """
    buckets: list[list[int]] = []
    open_: dict[tuple[str, str], tuple[list[int], int]] = {}
    for i in reversed(range(len(params))):
        p = params[i]
        key = (str(p.dtype), str(p.device))
        members, size = open_.get(key, ([], 0))
        limit = cap_bytes if buckets else min(cap_bytes, _FIRST_BUCKET_BYTES)
        if members and size + p.data.nbytes > limit:
            buckets.append(members)
            members, size = [], 0
        open_[key] = ([*members, i], size + p.data.nbytes)
    # The buckets still open go in the order backward reaches their first parameter.
    rest = sorted((members for members, _ in open_.values() if members), key=lambda m: -m[0])
    return buckets + rest


def _check_same_model(
    params: Sequence[tuple[str, sadl.Tensor]],
    buffers: Sequence[tuple[str, sadl.Tensor]],
    group: ProcessGroup,
) -> None:
    """Every rank must hold the same parameter and buffer names, shapes and dtypes."""
    if group.size == 1:
        return
    lines = [f"parameter {n} {tuple(t.shape)} {t.dtype}" for n, t in params]
    lines += [f"buffer {n} {tuple(t.shape)} {t.dtype}" for n, t in buffers]
    everyone = gather_bytes("\n".join(lines).encode(), group=group)
    for r, text in enumerate(everyone):
        if text != everyone[0]:
            raise MismatchError(
                f"DistributedDataParallel: rank {r}'s model differs from rank 0's: "
                f"{_first_difference(everyone[0].decode(), text.decode(), r)}. Every rank must "
                "build the same model (same configuration, same code)"
            )


def _first_difference(reference: str, other: str, r: int) -> str:
    def table(text: str) -> dict[str, str]:
        rows = [line.split(" ", 2) for line in text.splitlines() if line]
        return {f"{kind} {name!r}": rest for kind, name, rest in rows}

    ours, theirs = table(reference), table(other)
    for name, desc in ours.items():
        if name not in theirs:
            return f"rank 0 has {name} {desc}, rank {r} has no such {name.split()[0]}"
        if theirs[name] != desc:
            return f"{name} is {desc} on rank 0 and {theirs[name]} on rank {r}"
    extra = next((n for n in theirs if n not in ours), None)
    if extra is not None:
        return f"rank {r} has {extra} {theirs[extra]}, rank 0 has no such {extra.split()[0]}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:  # the same names, defined in another order: buckets would not line up
            return (
                f"the same names in a different order: number {i} is {a} on rank 0 and {b} "
                f"on rank {r} (define them in the same order on every rank)"
            )
    return f"rank {r} lists its parameters and buffers differently (a name given twice?)"


class _Bucket:
    """One flat buffer: the gradients of ``indices`` end to end, then one count per parameter."""

    __slots__ = ("arrived", "buffer", "filled", "indices", "numel", "offsets", "work")

    def __init__(self, indices: list[int], params: Sequence[sadl.Tensor]) -> None:
        self.indices = indices
        self.offsets: list[int] = []
        numel = 0
        for i in indices:
            self.offsets.append(numel)
            numel += params[i].size
        self.numel = numel
        first = params[indices[0]].data
        self.buffer = array_module(first).zeros(numel + len(indices), dtype=first.dtype)
        self.filled = [False] * len(indices)
        self.arrived = 0
        self.work: Work | None = None


class _Reducer:
    """The per-backward state machine behind DistributedDataParallel."""

    def __init__(self, params: list[sadl.Tensor], group: ProcessGroup, cap_bytes: int) -> None:
        self.params = params
        self.group = group
        self.syncing = True
        self.active = False  # between the first hook of a backward pass and its callback
        self.next_bucket = 0  # the next bucket to send (they go strictly in order)
        self.sent_during_backward = 0  # in the last pass, before backward had finished
        self.buckets: list[_Bucket] = []
        self.where: dict[int, tuple[_Bucket, int]] = {}
        self.handles: list[Any] = []
        self.closed = True
        if group.size == 1:
            return  # nothing to average: no buckets, no hooks, no cost
        self.buckets = [_Bucket(indices, params) for indices in plan_buckets(params, cap_bytes)]
        for bucket in self.buckets:
            for slot, i in enumerate(bucket.indices):
                self.where[i] = (bucket, slot)
        for i, p in enumerate(params):
            owner = _owners.get(id(p))
            if owner is not None and not owner.closed:
                raise DistributedError(
                    "DistributedDataParallel: this module's parameters are already wrapped by "
                    "another DistributedDataParallel; call its close() before wrapping again"
                )
            _owners[id(p)] = self
            hook = functools.partial(self._on_gradient, i)
            self.handles.append(p.register_post_accumulate_grad_hook(hook))
        self.closed = False

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.closed = True

    def check_idle(self) -> None:
        if self.active:
            raise DistributedError(
                "DistributedDataParallel: the previous backward pass failed after gradients "
                "started to travel between the ranks, so the ranks are out of step; restart "
                "the job (from the last checkpoint)"
            )

    # ------------------------------------------------------------------ during backward
    def _on_gradient(self, index: int, param: sadl.Tensor) -> None:
        if not self.syncing:
            return
        if not self.active:
            self._begin()
        bucket, slot = self.where[index]
        self._pack(bucket, slot, param.grad)
        bucket.arrived += 1
        if bucket.arrived == len(bucket.indices):
            self._send_ready()
        elif self.next_bucket:
            # Let MPI move the buckets already sent while backward computes the next ones.
            oldest = self.buckets[self.next_bucket - 1].work
            if oldest is not None:
                oldest.is_completed()

    def _begin(self) -> None:
        self.active = True
        self.next_bucket = 0
        for bucket in self.buckets:
            bucket.arrived = 0
            bucket.work = None
            bucket.filled = [False] * len(bucket.indices)
            bucket.buffer[bucket.numel :] = 0
        sadl.queue_backward_callback(self._finish)

    def _pack(self, bucket: _Bucket, slot: int, grad: Any) -> None:
        start = bucket.offsets[slot]
        size = self.params[bucket.indices[slot]].size
        target = bucket.buffer[start : start + size]
        if grad is None:
            target[...] = 0
            return
        if isinstance(grad, sadl.Tensor):
            grad = grad.data
        target[...] = grad.reshape(-1)
        bucket.buffer[bucket.numel + slot] = 1
        bucket.filled[slot] = True

    def _send_ready(self) -> None:
        while self.next_bucket < len(self.buckets):
            bucket = self.buckets[self.next_bucket]
            if bucket.arrived < len(bucket.indices):
                return
            bucket.work = all_reduce(bucket.buffer, "sum", group=self.group, async_op=True)
            self.next_bucket += 1

    # ------------------------------------------------------------------ after backward
    def _finish(self) -> None:
        """Send the buckets that parameters without a gradient kept back; wait; write back."""
        self.sent_during_backward = self.next_bucket  # how much communication overlapped
        for bucket in self.buckets[self.next_bucket :]:
            for slot, i in enumerate(bucket.indices):
                if not bucket.filled[slot]:
                    # Not reached in this pass: what it has (from no_sync steps) or nothing.
                    self._pack(bucket, slot, self.params[i].grad)
            bucket.arrived = len(bucket.indices)
        self._send_ready()
        for bucket in self.buckets:
            assert bucket.work is not None
            bucket.work.wait()
            self._unpack(bucket)
        self.active = False

    def _unpack(self, bucket: _Bucket) -> None:
        data = bucket.buffer[: bucket.numel]
        data /= self.group.size
        counts = np.asarray(to_device(bucket.buffer[bucket.numel :], "cpu"))
        for slot, i in enumerate(bucket.indices):
            if counts[slot] == 0:
                continue  # no rank had a gradient for it: it stays None, as in one process
            p = self.params[i]
            start = bucket.offsets[slot]
            value = data[start : start + p.size].reshape(p.shape)
            grad = p.grad
            if (
                is_array(grad)
                and grad.shape == p.shape
                and grad.dtype == value.dtype
                and getattr(grad.flags, "writeable", True)
            ):
                grad[...] = value
            else:
                p.grad = value.copy()
