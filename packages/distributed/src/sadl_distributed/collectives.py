"""Collectives on Tensors and arrays, and ``check_same`` for what every rank must agree on.

``all_reduce``, ``broadcast``, ``all_gather`` and ``reduce_scatter``, as in torch.distributed.

Every rank calls the same collectives in the same order with arrays of the same shape and dtype
(as in MPI and torch.distributed). CPU arrays go to MPI as they are (no pickling, no copy when
they are contiguous); CUDA arrays go through NCCL when CuPy has it, else through host memory.
A Tensor is updated with ``copy_`` (so its version counter sees the write); its graph is not
involved: collectives are not differentiable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import sadl
from sadl.backends import array_module, device_of, is_array, to_device

from sadl_distributed.errors import MismatchError
from sadl_distributed.group import ProcessGroup, Work
from sadl_distributed.world import device_group, get_group

__all__ = [
    "REDUCE_OPS",
    "all_gather",
    "all_reduce",
    "broadcast",
    "check_same",
    "gather_bytes",
    "reduce_scatter",
]

#: The reductions ``all_reduce`` and ``reduce_scatter`` know.
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")


def all_reduce(
    x: Any, op: str = "sum", *, group: ProcessGroup | None = None, async_op: bool = False
) -> Any:
    """Combine ``x`` (a Tensor or array) over every rank, in place; returns ``x``.

    ``op`` is ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` or ``"prod"``. With ``async_op=True``
    the call returns a :class:`Work` at once; ``x`` holds the result after ``work.wait()``.
    """
    g, array = _resolve(x, group, "all_reduce")
    _check_op(op, array, "all_reduce")
    if g.size == 1:  # the reduction of one value is that value
        return _finish(Work(g, None, "all_reduce"), x, async_op)
    buffer, put_back = _staging(x, array, g, reduction=True)
    work = g.all_reduce(buffer, "sum" if op == "mean" else op)
    if op == "mean":
        work.then(lambda: _divide(buffer, g.size))
    return _finish(work.then(lambda: put_back(buffer)), x, async_op)


def broadcast(
    x: Any, src: int = 0, *, group: ProcessGroup | None = None, async_op: bool = False
) -> Any:
    """Overwrite ``x`` on every rank with rank ``src``'s ``x``, in place; returns ``x``."""
    g, array = _resolve(x, group, "broadcast")
    if g.size == 1:
        return _finish(g.broadcast(array, src), x, async_op)
    buffer, put_back = _staging(x, array, g, reduction=False)
    work = g.broadcast(buffer, src).then(lambda: put_back(buffer))
    return _finish(work, x, async_op)


def all_gather(x: Any, *, group: ProcessGroup | None = None) -> Any:
    """Every rank's ``x`` stacked: shape ``(world_size, *x.shape)``, on every rank.

    Returns an array for an array, a Tensor (not requiring grad) for a Tensor.
    """
    g, array = _resolve(x, group, "all_gather")
    buffer, _ = _staging(x, array, g, reduction=False)
    out = array_module(buffer).empty((g.size, *buffer.shape), dtype=buffer.dtype)
    g.all_gather(buffer, out).wait()
    return _like(x, array, out)


def reduce_scatter(x: Any, op: str = "sum", *, group: ProcessGroup | None = None) -> Any:
    """Combine ``x`` over every rank and give rank r the r-th of ``world_size`` equal chunks.

    ``x.shape[0]`` must be a multiple of the world size; the result has shape
    ``(x.shape[0] // world_size, *x.shape[1:])``. ``op`` as for :func:`all_reduce`.
    """
    g, array = _resolve(x, group, "reduce_scatter")
    _check_op(op, array, "reduce_scatter")
    if array.ndim == 0 or array.shape[0] % g.size:
        raise ValueError(
            f"reduce_scatter: the first axis ({array.shape[0] if array.ndim else 'none'}) must "
            f"be a multiple of the world size {g.size}; shape is {array.shape}"
        )
    buffer, _ = _staging(x, array, g, reduction=True)
    chunk = (buffer.shape[0] // g.size, *buffer.shape[1:])
    out = array_module(buffer).empty(chunk, dtype=buffer.dtype)
    g.reduce_scatter(buffer, out, "sum" if op == "mean" else op).wait()
    if op == "mean":
        _divide(out, g.size)
    return _like(x, array, out)


def check_same(value: Any, what: str = "the value", *, group: ProcessGroup | None = None) -> None:
    """Raise :class:`MismatchError` unless every rank passed an equal ``value``.

    ``value`` is bytes, a string, a number, an array or a Tensor (compared by dtype, shape and
    content, through a 16-byte digest: cheap even for a large array). Every rank raises the same
    error, naming which ranks disagree.
    """
    g = group or get_group()
    mine = np.frombuffer(_digest(value), dtype=np.uint8).copy()  # checks the value, too
    if g.size == 1:
        return
    everyone = np.empty((g.size, mine.size), dtype=np.uint8)
    g.all_gather(mine, everyone).wait()
    groups: dict[bytes, list[int]] = {}
    for r in range(g.size):
        groups.setdefault(everyone[r].tobytes(), []).append(r)
    if len(groups) > 1:
        sides = " vs ".join(str(ranks) for ranks in groups.values())
        raise MismatchError(
            f"the ranks disagree on {what} (ranks {sides}: each group has a different value); "
            "every rank must have the same (same data, same seed, same configuration)"
        )


def gather_bytes(data: bytes, *, group: ProcessGroup | None = None) -> list[bytes]:
    """Every rank's ``data`` (bytes of any length), in rank order, on every rank."""
    g = group or get_group()
    if g.size == 1:
        return [bytes(data)]
    lengths = np.empty((g.size, 1), dtype=np.int64)
    g.all_gather(np.array([len(data)], dtype=np.int64), lengths).wait()
    longest = int(lengths.max())
    mine = np.zeros(longest, dtype=np.uint8)
    mine[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    everyone = np.empty((g.size, longest), dtype=np.uint8)
    g.all_gather(mine, everyone).wait()
    return [everyone[r, : int(lengths[r, 0])].tobytes() for r in range(g.size)]


# ------------------------------------------------------------------------------------ helpers
def _resolve(x: Any, group: ProcessGroup | None, what: str) -> tuple[ProcessGroup, Any]:
    """The group that moves ``x`` (NCCL's for CUDA data) and ``x``'s array."""
    if isinstance(x, sadl.Tensor):
        array = x.data
    elif is_array(x):
        array = x
    else:
        raise TypeError(f"{what}: expected a sadl Tensor or an array, got {type(x).__name__}")
    g = group or get_group()
    if g.size > 1 and device_of(array).type != "cpu" and g is get_group():
        g = device_group(g)
    return g, array


def _check_op(op: str, array: Any, what: str) -> None:
    if op not in REDUCE_OPS:
        raise ValueError(f"{what}: unknown op {op!r}; expected one of {list(REDUCE_OPS)}")
    kind = array.dtype.kind
    if kind not in "fciu":
        raise TypeError(f"{what}: cannot reduce {array.dtype} arrays (numbers only)")
    if op == "mean" and kind not in "fc":
        raise TypeError(
            f"{what}: the mean of {array.dtype} arrays is not an integer; use op='sum', or "
            "convert to a floating dtype first"
        )


def _staging(
    x: Any, array: Any, group: ProcessGroup, *, reduction: bool
) -> tuple[Any, Callable[[Any], None]]:
    """A contiguous buffer the group can move, and how to write the result back into ``x``.

    ``array`` itself when that is possible; a copy for a Tensor (written back with ``copy_``),
    for strided arrays, for float16 reductions over MPI (summed in float32) and for CUDA
    arrays without NCCL (staged through host memory).
    """
    device = device_of(array)
    on_host = group.backend != "nccl" and device.type != "cpu"
    widen = reduction and group.backend != "nccl" and array.dtype == np.float16
    if not (isinstance(x, sadl.Tensor) or on_host or widen or not array.flags.c_contiguous):
        return array, _nothing
    buffer = to_device(array, "cpu") if on_host else array
    dtype = np.float32 if widen else array.dtype
    buffer = array_module(buffer).array(buffer, dtype=dtype, order="C", copy=True)

    def put_back(result: Any) -> None:
        value = to_device(result, device) if on_host else result
        if isinstance(x, sadl.Tensor):
            with sadl.no_grad():
                x.copy_(value)
        else:
            array[...] = value

    return buffer, put_back


def _nothing(result: Any) -> None:
    """The result is already where the caller looks."""


def _divide(buffer: Any, size: int) -> None:
    buffer /= size


def _finish(work: Work, x: Any, async_op: bool) -> Any:
    if async_op:
        return work
    work.wait()
    return x


def _like(x: Any, array: Any, out: Any) -> Any:
    """``out`` as ``x`` would have it: same device and dtype; a Tensor for a Tensor."""
    device = device_of(array)
    if device_of(out) != device:
        out = to_device(out, device)
    if out.dtype != array.dtype:
        out = out.astype(array.dtype)
    return sadl.Tensor(out) if isinstance(x, sadl.Tensor) else out


def _digest(value: Any) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    if isinstance(value, sadl.Tensor):
        value = value.numpy()
    elif is_array(value):
        value = to_device(value, "cpu")
    if isinstance(value, np.ndarray | np.generic):
        array = np.ascontiguousarray(value)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes())
    elif isinstance(value, bytes | bytearray | memoryview):
        h.update(b"bytes:" + bytes(value))
    elif isinstance(value, str):
        h.update(b"str:" + value.encode())
    elif isinstance(value, bool | int | float | complex):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    else:
        raise TypeError(
            f"check_same: cannot compare {type(value).__name__!r} values; pass bytes, a "
            "string, a number, an array or a Tensor"
        )
    return h.digest()
