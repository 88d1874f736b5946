"""The memory plan: every temporary array lives in a buffer allocated once, reused across calls.

Walking the graph in order, each call that allocates a new array (a ufunc, a matmul, a
reduction, a copy) gets a place in one arena and writes into it with ``out=``; an array is in
use from that call to the last node reading any view of its memory, and arrays in use at the
same node never overlap (an elementwise ufunc may write straight into the place of an operand
that dies at that very call). Places are packed greedily by size, which comes within a few
per cent of the most memory in use at any node. Places are laid out like the arrays they
replace (same strides), so every view and copy NumPy makes downstream behaves as in the
trace. Views of the arena and of captured arrays are computed once, while compiling.

Arrays that leave the call (returned, stored as ``.grad``), arrays whose shape depends on data
and arrays of calls without an ``out=`` stay fresh allocations, released as early as possible.
The result is bit for bit the same: NumPy computes ``f(x, out=buf)`` exactly as ``f(x)``.

On a device the plan is the same, with buffers allocated on the device of the arrays they
replace (a buffer is only shared between arrays of one device) and copies made with the
backend's own ``copyto``; calls are known by their NumPy ``key`` (``sadl_compile.device``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl.backends import array_module, to_device

from sadl_compile.ir import Graph, Node, Storage, Value, iter_values
from sadl_compile.rewrite import contiguous

__all__ = ["memory_plan", "plan_stats"]

_ndarray = np.ndarray
_ALIGN = 64

#: NumPy functions and ndarray methods that accept ``out=`` with the result's shape and dtype.
_OUT_FUNCS: frozenset[Any] = frozenset(
    {
        np.dot,
        np.einsum,
        np.sum,
        np.prod,
        np.max,
        np.min,
        np.amax,
        np.amin,
        np.mean,
        np.cumsum,
        np.cumprod,
        np.clip,
        np.take,
        np.concatenate,
        np.stack,
        np.round,
        _ndarray.sum,
        _ndarray.prod,
        _ndarray.max,
        _ndarray.min,
        _ndarray.mean,
        _ndarray.cumsum,
        _ndarray.clip,
        _ndarray.take,
        _ndarray.dot,
        _ndarray.all,
        _ndarray.any,
        _ndarray.round,
    }
)


#: Functions whose ``out=`` only NumPy has (CuPy's einsum takes none).
_HOST_ONLY_OUT: frozenset[Any] = frozenset({np.einsum})

#: Constructors whose array is just memory (np.empty) or memory filled with a constant.
_EMPTY: frozenset[Any] = frozenset({np.empty, np.empty_like})
_FILLED: dict[Any, int] = {np.zeros: 0, np.zeros_like: 0, np.ones: 1, np.ones_like: 1}
#: Calls that copy their first argument (converted, for astype): np.copyto into the buffer.
_COPIES: frozenset[Any] = frozenset(
    {_ndarray.copy, _ndarray.astype, np.copy, np.ascontiguousarray, np.array}
)
#: Calls that return a view when they can and a C-order copy otherwise, with how many
#: positional arguments they take before an ``order`` (the array included).
_RESHAPES: dict[Any, int] = {
    _ndarray.reshape: 1 << 30,  # a.reshape(*shape): every positional argument is a dimension
    np.reshape: 2,
    _ndarray.ravel: 1,
    np.ravel: 1,
    _ndarray.flatten: 1,
}


def writes_into(node: Node) -> str | None:
    """How the node's single output can be made in a given buffer: ``"out"`` (pass ``out=``),
    ``"empty"`` (the buffer is the result), ``"fill"`` / ``"copy"`` (``np.copyto`` into it),
    ``"reshape"`` (a reshape that copied: ``np.copyto`` into the buffer in the source's shape).
    """
    if node.kind != "call" or len(node.outputs) != 1 or "out" in node.kwargs:
        return None
    key = node.key
    if isinstance(key, tuple):
        ufunc, method = key
        ok = method in ("__call__", "reduce", "accumulate") and ufunc.nout == 1
        return "out" if ok else None
    on_device = node.outputs[0].storage.device is not None
    if key in _OUT_FUNCS or node.meta.get("accepts_out"):
        return None if on_device and key in _HOST_ONLY_OUT else "out"
    if key in _EMPTY:
        return "empty"
    if key in _FILLED and not node.kwargs.get("fill_value"):
        return "fill"
    if key in _COPIES and node.args and type(node.args[0]) is Value:
        if node.args[0].storage.device != node.outputs[0].storage.device:
            return None  # a copy between the host and a device: made by the transfer
        order = node.kwargs.get("order", "K")
        return "copy" if order in ("K", "A", "C") or node.outputs[0].strides else None
    if key in _RESHAPES and _copied_reshape(node, _RESHAPES[key]):
        return "reshape"
    return None


def _copied_reshape(node: Node, positional: int) -> bool:
    """A C-order reshape (ravel, flatten) whose result is a copy, not a view of its source.

    The copy is then the source's elements in C order: ``np.copyto`` of the source into a
    C-contiguous buffer of the source's shape, viewed in the result's shape, makes the same
    array (the argument layouts are part of the trace's key, so it copies on every replay too).
    """
    src, out = (node.args[0] if node.args else None), node.outputs[0]
    return (
        type(src) is Value
        and len(node.args) <= positional
        and node.kwargs.get("order", "C") == "C"
        and set(node.kwargs) <= {"order"}
        and src.storage is not out.storage
        and src.storage.device == out.storage.device
        and src.dtype == out.dtype
        and len(out.shape) == len(out.strides)
        and contiguous(out)
    )


def _rewrite(node: Node, how: str, buffer: Any) -> bool:
    """Make ``node`` produce its output in ``buffer``; False when the node is not needed."""
    if how == "out":
        node.kwargs = {**node.kwargs, "out": buffer}
        return True
    if how == "empty":
        return False
    out = node.outputs[0]
    if how == "fill":
        # the constant in the buffer's dtype (a bool buffer takes no int under same_kind)
        args: tuple[Any, ...] = (buffer, out.dtype.type(_FILLED[node.key]))
        kwargs: dict[str, Any] = {}
        node.reads = ()
    elif how == "reshape":  # the source's elements in C order, then viewed as the result
        src = node.args[0]
        assert buffer.flags.c_contiguous  # so that this reshape is a view of the buffer
        args, kwargs = (buffer.reshape(src.shape), src), {}
        node.reads = (src,)
    else:  # copy: np.copyto converts like astype / np.array do
        args, kwargs = (buffer, node.args[0]), {"casting": "unsafe"}
        node.reads = (node.args[0],)
    node.key = np.copyto
    node.func = array_module(buffer).copyto  # the device's own copyto for a device buffer
    node.label = "copyto"
    node.args, node.kwargs = args, kwargs
    node.outputs, node.writes = (), (out,)
    return True


def _elementwise(node: Node) -> bool:
    key = node.key
    return (
        isinstance(key, tuple)
        and key[1] == "__call__"
        and key[0].signature is None
        and key[0].nout == 1
    )


def _dense_layout(v: Value) -> tuple[int, ...] | None:
    """The axis order (outermost first) in which ``v``'s strides are dense, or None."""
    if len(v.shape) != len(v.strides):
        return None
    order = sorted(range(len(v.shape)), key=lambda i: -abs(v.strides[i]))
    step = v.dtype.itemsize
    for i in reversed(order):
        if v.shape[i] != 1 and v.strides[i] != step:
            return None
        step *= v.shape[i]
    return tuple(order)


def _allocate(nbytes: int, device: Any) -> Any:
    """``nbytes`` of memory on ``device`` (None: the host, aligned to a cache line).

    A device buffer is made by copying host memory there once, the one way every backend
    offers to make an array on a given device.
    """
    if device is not None:
        return to_device(np.zeros(nbytes, np.uint8), device)
    raw = np.empty(nbytes + _ALIGN, np.uint8)
    start = (-raw.ctypes.data) % _ALIGN
    return raw[start : start + nbytes]


def _view(raw: Any, v: Value, order: tuple[int, ...]) -> Any:
    """An array over ``raw`` with ``v``'s shape, dtype and strides."""
    permuted = tuple(v.shape[i] for i in order)
    flat = raw[: v.nbytes].view(v.dtype)
    inverse = np.argsort(order)
    return flat.reshape(permuted).transpose(tuple(int(i) for i in inverse))


class _Slot:
    """Memory that arrays take in turn (an elementwise result over its dying operand): its
    size, the span of nodes it is in use, and its place in the arena.
    """

    __slots__ = ("capacity", "device", "end", "offset", "start", "values")

    def __init__(self, capacity: int, device: Any, start: int) -> None:
        self.capacity = capacity
        self.device = device  #: where the buffer lives (None: the host)
        self.start = start  #: index of the node that first writes it
        self.end = start  #: index of the last node that reads any of its arrays
        self.offset = 0  #: bytes from the start of the arena of its device
        self.values: list[tuple[Value, tuple[int, ...]]] = []


def _last_uses(graph: Graph) -> dict[Storage, int]:
    last: dict[Storage, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.reads:
            last[v.storage] = i
        for v in node.writes:
            last[v.storage] = i
        for v in node.outputs:
            last.setdefault(v.storage, i)
        source = node.meta.get("source")
        if source is not None:
            for v in source.reads:
                last[v.storage] = i
    return last


def _plannable(v: Value, node: Node, how: str) -> bool:
    """A temporary the call makes anew each time, whose memory no other value spans.

    A reshape that copied returns a view of the copy it made (in the source's shape), which
    no value of the graph holds: its result spans that memory though it is not the owner.
    """
    s = v.storage
    return (
        s.kind == "temp"
        and (s.root is v or (how == "reshape" and s.root is None))
        and not s.escapes
        and not s.dynamic
        and not s.const
        and v.nbytes > 0
    )


def memory_plan(graph: Graph, context: Any) -> None:
    """Give every temporary a reused buffer (``out=``), and hoist views of persistent arrays."""
    last = _last_uses(graph)
    slots: list[_Slot] = []
    number: dict[int, int] = {}  # id of a slot -> its index in slots
    owner: dict[Storage, _Slot] = {}
    planned = 0
    rewrites: list[tuple[Node, str]] = []
    for i, node in enumerate(graph.nodes):
        how = writes_into(node)
        if how is not None:
            v = node.outputs[0]
            order = _dense_layout(v)
            if _plannable(v, node, how) and order is not None:
                rewrites.append((node, how))
                slot = _reuse_in_place(node, v, owner, last, i)
                if slot is None:
                    slot = _Slot(v.nbytes, v.storage.device, i)
                    number[id(slot)] = len(slots)
                    slots.append(slot)
                slot.values.append((v, order))
                slot.end = max(slot.end, last.get(v.storage, i))
                owner[v.storage] = slot
                node.meta["buffer"] = number[id(slot)]
                planned += 1
    arenas = _pack(slots)
    for device, total in arenas.items():
        raw = _allocate(total, device)
        for slot in (s for s in slots if s.device == device):
            for v, order in slot.values:
                v.array = _view(raw[slot.offset : slot.offset + slot.capacity], v, order)
    dropped = {id(node) for node, how in rewrites if not _rewrite(node, how, node.outputs[0].array)}
    graph.nodes = [node for node in graph.nodes if id(node) not in dropped]
    hoisted = _hoist_views(graph)
    total, busiest = sum(arenas.values()), _busiest(slots)
    graph.meta["arena_bytes"] = total
    graph.meta["busiest_bytes"] = busiest
    graph.notes.append(
        f"memory_plan: {planned} arrays in {len(slots)} places of one arena per device "
        f"({total / 2**20:.1f} MiB, allocated once; {busiest / 2**20:.1f} MiB in use at the "
        f"busiest node); {hoisted} views computed once"
    )


def _reuse_in_place(
    node: Node, v: Value, owner: dict[Storage, _Slot], last: dict[Storage, int], i: int
) -> _Slot | None:
    """An elementwise ufunc may overwrite an operand laid out exactly like its result that is
    read for the last time here (NumPy handles ``np.add(a, b, out=a)`` exactly).
    """
    if not _elementwise(node):
        return None
    for operand in node.reads:
        s = operand.storage
        if (
            s in owner
            and s.device == v.storage.device
            and last.get(s) == i
            and s.root is operand
            and operand.shape == v.shape
            and operand.dtype == v.dtype
            and operand.strides == v.strides
            and sum(1 for r in node.reads if r.storage is s) == 1
        ):
            slot = owner[s]
            if slot.capacity >= v.nbytes:
                return slot
    return None


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


def _pack(slots: list[_Slot]) -> dict[Any, int]:
    """Give each slot an offset in its device's arena, no two slots in use at the same node
    overlapping; returns each device's arena size.

    Greedy by size (TensorFlow Lite's planner): largest first, each into the smallest gap
    between the slots it meets in time that holds it (the end of the arena when none does).
    Offsets and sizes are cache-line multiples.
    """
    totals: dict[Any, int] = {}
    devices: dict[Any, int] = {}
    n = len(slots)
    # the placed slots so far, in placing order: spans, places, devices (as arrays, so that
    # finding the ones a slot meets is one vectorised test, not a Python loop per pair)
    starts, ends, offsets, sizes, codes = (np.empty(n, np.int64) for _ in range(5))
    for k, slot in enumerate(sorted(slots, key=lambda s: (-s.capacity, s.start))):
        size = _aligned(slot.capacity)
        code = devices.setdefault(slot.device, len(devices))
        met = np.flatnonzero(
            (starts[:k] <= slot.end) & (ends[:k] >= slot.start) & (codes[:k] == code)
        )
        by_offset = met[np.argsort(offsets[met], kind="stable")]
        lows, highs = offsets[by_offset], offsets[by_offset] + sizes[by_offset]
        # the end of the places before each one met (0 before the first): the gap below it
        below = np.maximum.accumulate(np.concatenate(([0], highs)))
        gaps = lows - below[:-1]
        fits = np.flatnonzero(gaps >= size)
        at = int(below[-1])  # the end of the arena as the slot meets it: where no gap holds it
        if fits.size:  # the smallest gap that holds it, the lowest of equal ones
            at = int(below[fits[np.argmin(gaps[fits])]])
        slot.offset = at
        starts[k], ends[k], offsets[k], sizes[k], codes[k] = slot.start, slot.end, at, size, code
        totals[slot.device] = max(totals.get(slot.device, 0), at + size)
    return totals


def _busiest(slots: list[_Slot]) -> int:
    """The most bytes in use at any one node: no plan can do with less."""
    change: dict[int, int] = {}
    for s in slots:
        change[s.start] = change.get(s.start, 0) + _aligned(s.capacity)
        change[s.end + 1] = change.get(s.end + 1, 0) - _aligned(s.capacity)
    busiest = in_use = 0
    for i in sorted(change):
        in_use += change[i]
        busiest = max(busiest, in_use)
    return busiest


def _hoist_views(graph: Graph) -> int:
    """Compute once the views (reshape, slice, transpose) of arrays that live across calls."""
    persistent = {
        v.index
        for v in graph.values
        if v.array is not None or (v.entry is not None and v.entry[0] in ("data", "const"))
    }
    kept: list[Node] = []
    hoisted = 0
    for node in graph.nodes:
        if (
            node.kind == "call"
            and len(node.outputs) == 1
            and not node.writes
            and node.outputs[0].storage in {r.storage for r in node.reads}
            and node.outputs[0].storage.kind != "input"
            and all(r.index in persistent for r in node.reads)
        ):
            out = node.outputs[0]
            args = _resolve(node.args)
            kwargs = _resolve(node.kwargs)
            assert node.func is not None
            out.array = node.func(*args, **kwargs)
            persistent.add(out.index)
            hoisted += 1
            continue
        kept.append(node)
    graph.nodes = kept
    return hoisted


def _resolve(tree: Any) -> Any:
    if type(tree) is Value:
        if tree.array is not None:
            return tree.array
        assert tree.entry is not None
        return tree.entry[1]
    if isinstance(tree, tuple):
        return tuple(_resolve(x) for x in tree)
    if isinstance(tree, list):
        return [_resolve(x) for x in tree]
    if isinstance(tree, dict):
        return {k: _resolve(v) for k, v in tree.items()}
    return tree


def plan_stats(graph: Graph) -> dict[str, int]:
    """Buffers and bytes of the plan (for benchmarks and tests)."""
    outs = {v.index for v in iter_values(graph.outputs)}
    return {
        "arena_bytes": int(graph.meta.get("arena_bytes", 0)),
        "busiest_bytes": int(graph.meta.get("busiest_bytes", 0)),
        "outputs": len(outs),
    }
