"""``fuse_elementwise``: run a chain of elementwise ufuncs block by block, in the CPU cache.

NumPy evaluates ``tanh(a * b + c)`` as three passes over memory, each writing a full-size
temporary. When the arrays are larger than the cache, memory traffic dominates; computing the
chain on blocks of rows (16K elements, a few L1/L2-sized scratch buffers) reads each input and
writes the result once. It pays for large arrays and chains of two calls or more; smaller arrays
already live in the cache and are left alone.

A chain is a run of consecutive ufunc calls (``__call__`` of an elementwise ufunc) producing
arrays of one shape, whose intermediate results nothing outside the chain reads. Operands of the
full shape are sliced by rows; operands that broadcast along the first axis are used whole. The
fused node is generated Python (readable with the rest of the replay).

Blocks change nothing about the arithmetic of each element, but NumPy's vectorized loops may
treat the last elements of a block differently from the middle of an array (transcendental
functions), so results can differ from eager in the last bit: this pass is a *fusion* pass,
skipped by ``sadl.compile(fusion=False)``.

Threads: the blocks of a chain of more than ``2 * PER_THREAD`` elements are split between the
threads sadl's policy gives it (``sadl.backends.threads_for``: ``sadl.set_num_threads``, the
thread variables, a threadpoolctl limit and the cores left free count), each thread with
scratch buffers of its own; NumPy's ufuncs release the GIL. The blocks are the same on any
thread count, so a chain's results are bit for bit the same on one thread and on several.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from sadl.backends import threads_for

from sadl_compile.ir import Graph, Node, Storage, Value, iter_values

__all__ = ["FusedKernel", "fuse_elementwise"]

#: Arrays smaller than this (elements) stay unfused: they already fit in the cache.
MIN_ELEMENTS = 1 << 16
#: Elements per block: a few blocks of scratch (256 KiB each in float32) stay in the L2 cache.
BLOCK = 1 << 16


def _eligible(node: Node) -> bool:
    key = node.key
    if node.kind != "call" or not isinstance(key, tuple) or key[1] != "__call__":
        return False
    if any(v.storage.device is not None for v in (*node.reads, *node.outputs, *node.writes)):
        return False  # blocks sized for a CPU cache; a device runs the chain as it is
    ufunc = key[0]
    if ufunc.signature is not None or ufunc.nout != 1 or set(node.kwargs) - {"out"}:
        return False
    out = node.kwargs.get("out")
    if out is not None:
        targets = out if isinstance(out, tuple) else (out,)
        if len(targets) != 1 or type(targets[0]) is not Value:
            return False
    return all(type(a) is Value or isinstance(a, int | float) for a in node.args)


def _result(node: Node) -> Value:
    return node.outputs[0] if node.outputs else node.writes[0]


class FusedKernel:
    """A chain of ufunc calls evaluated block by block; called as ``kernel(*inputs, out=)``."""

    def __init__(self, source: str, namespace: dict[str, Any], text: str) -> None:
        self.source = source
        self.text = text
        exec(compile(source, "<sadl.compile fused kernel>", "exec"), namespace)
        self.run = namespace["fused"]
        self.__name__ = "fused"

    def __call__(self, *inputs: Any, out: Any = None) -> Any:
        return self.run(out, *inputs)

    def __repr__(self) -> str:
        return f"fused[{self.text}]"


def _build(chain: list[Node], inputs: list[Value], result: Value) -> FusedKernel:
    """Generate the block loop for ``chain`` (whose last value is ``result``).

    Intermediate values live in block-sized scratch buffers, reused once a value is dead; full
    blocks use the scratch buffers as they are, a last partial block slices them.
    """
    shape = result.shape
    rows = shape[0]
    per_row = math.prod(shape[1:]) or 1
    block = max(1, min(rows, BLOCK // per_row))
    namespace: dict[str, Any] = {"empty": np.empty}
    local = {v.index: f"x{i}" for i, v in enumerate(inputs)}
    sliced = {v.index for v in inputs if len(v.shape) == len(shape) and v.shape[0] == rows}
    last_use: dict[int, int] = {}
    for k, node in enumerate(chain):
        for v in node.reads:
            last_use[v.index] = k
    register: dict[int, int] = {}  # value index -> scratch buffer number
    free: dict[Any, list[int]] = {}
    buffers: list[Any] = []
    steps: list[tuple[str, list[Any], Any]] = []
    names: list[str] = []
    for k, node in enumerate(chain):
        ufunc = node.key[0]
        names.append(ufunc.__name__)
        target = _result(node)
        if target is not result and target.index not in register:
            pool = free.setdefault(target.dtype, [])
            if pool:
                register[target.index] = pool.pop()
            else:
                register[target.index] = len(buffers)
                buffers.append(target.dtype)
        steps.append((f"u{k}", list(node.args), target))
        namespace[f"u{k}"] = ufunc
        for v in dict.fromkeys(node.reads):  # a value read twice (a * a) is released once
            if last_use.get(v.index) == k and v.index in register and v is not target:
                free.setdefault(v.dtype, []).append(register[v.index])

    def operand(a: Any, tail: bool) -> str:
        if type(a) is not Value:  # a constant (inf, nan, a NumPy scalar): a global of its own
            name = f"c{len(namespace)}"
            namespace[name] = a
            return name
        if a is result:
            return "o"
        if a.index in register:
            return f"s{register[a.index]}" + ("[:n]" if tail else "")
        name = local[a.index]
        return f"{name}[i:j]" if a.index in sliced else name

    def block_body(tail: bool) -> list[str]:
        lines = []
        for fname, args, target in steps:
            text = ", ".join(operand(a, tail) for a in args)
            lines.append(f"{fname}({text}, out={operand(target, tail)})")
        return lines

    namespace["scratch"] = [[np.empty((block, *shape[1:]), d) for d in buffers]]
    namespace["run"] = _on_threads
    full = rows - rows % block
    params = ", ".join(f"x{i}" for i in range(len(inputs)))
    unpack = f"    {''.join(f's{b}, ' for b in range(len(buffers)))}= S" if buffers else "    pass"
    lines = [
        f"def part(out, start, stop, S, {params}):",
        unpack,
        f"    for i in range(start, min(stop, {full}), {block}):",
        f"        j = i + {block}",
        "        o = out[i:j]",
        *(f"        {line}" for line in block_body(False)),
    ]
    if full < rows:
        lines += [
            f"    if stop > {full}:",
            f"        i, j, n = {full}, {rows}, {rows - full}",
            "        o = out[i:j]",
            *(f"        {line}" for line in block_body(True)),
        ]
    lines += [
        f"def fused(out, {params}):",
        "    if out is None:",
        f"        out = empty({shape!r}, {result.dtype.str!r})",
        f"    run(part, out, ({params}{',' if len(inputs) == 1 else ''}), scratch,"
        f" {rows}, {block}, {math.prod(shape)})",
        "    return out",
    ]
    return FusedKernel("\n".join(lines) + "\n", namespace, " -> ".join(names))


#: Elements each thread of a fused chain must get (four blocks: a thread's start costs tens of
#: microseconds, a block's chain about as much per call), so a second thread from 512 Ki.
PER_THREAD = 1 << 18
_pool: list[Any] = []  # the worker threads (a ThreadPoolExecutor), made on first need


def _on_threads(
    part: Any,
    out: Any,
    inputs: tuple[Any, ...],
    scratch: list[Any],
    rows: int,
    block: int,
    elements: int,
) -> None:
    """``part`` over every block of rows, the blocks split between the threads sadl's policy
    gives the chain's size (``sadl.backends.threads_for``), each with scratch buffers of its
    own. The blocks are the same on any thread count, so the results are bit for bit the same.
    """
    blocks = -(-rows // block)
    n = min(threads_for(elements, PER_THREAD), blocks)
    if n <= 1:
        part(out, 0, rows, scratch[0], *inputs)
        return
    while len(scratch) < n:  # one set per thread (NumPy releases the GIL in each ufunc)
        scratch.append([np.empty_like(s) for s in scratch[0]])
    if not _pool:
        from concurrent.futures import ThreadPoolExecutor

        _pool.append(ThreadPoolExecutor(thread_name_prefix="sadl-fused"))
    edges = [k * blocks // n * block for k in range(n)] + [rows]
    jobs = [
        _pool[0].submit(part, out, edges[k], edges[k + 1], scratch[k], *inputs) for k in range(1, n)
    ]
    part(out, edges[0], edges[1], scratch[0], *inputs)
    for job in jobs:
        job.result()


if hasattr(os, "register_at_fork"):  # a fork has none of the parent's worker threads
    os.register_at_fork(after_in_child=_pool.clear)


def _last_reads(graph: Graph) -> dict[Storage, int]:
    """For each storage, the index of the last node reading it (the outputs: past the end)."""
    last: dict[Storage, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.reads:
            last[v.storage] = i
        source = node.meta.get("source")
        if source is not None:
            for v in source.reads:
                last[v.storage] = i
    for v in iter_values(graph.outputs):
        last[v.storage] = len(graph.nodes)
    return last


def _try_chain(
    graph: Graph, start: int, last: dict[Storage, int]
) -> tuple[list[Node], Value] | None:
    """The longest fusable chain of nodes from ``start`` (at least two), and its result."""
    first = graph.nodes[start]
    if not _eligible(first):
        return None
    shape = _result(first).shape
    if math.prod(shape) < MIN_ELEMENTS or not shape:
        return None
    chain: list[Node] = []
    end = start
    while end < len(graph.nodes):
        node = graph.nodes[end]
        if not _eligible(node) or _result(node).shape != shape:
            break
        if any(type(a) is Value and not _fits(a, shape) for a in node.args):
            break
        chain.append(node)
        end += 1
    while len(chain) >= 2 and not _closed(chain, start, last):
        chain.pop()
    if len(chain) < 2:
        return None
    return chain, _result(chain[-1])


def _fits(v: Value, shape: tuple[int, ...]) -> bool:
    """Sliceable by rows (the full shape's first axis) or broadcast along it."""
    if len(v.shape) < len(shape):
        return True
    return len(v.shape) == len(shape) and v.shape[0] in (shape[0], 1)


def _closed(chain: list[Node], start: int, last: dict[Storage, int]) -> bool:
    """Only the last result leaves the chain; written memory is not read under another view.

    ``last``: the index of each storage's last reader (:func:`_last_reads`).
    """
    result = _result(chain[-1])
    made = {v.index for n in chain for v in n.outputs}
    after = start + len(chain)
    storages_of: dict[Storage, set[int]] = {}
    for node in chain:
        for v in (*node.reads, *node.outputs, *node.writes):
            storages_of.setdefault(v.storage, set()).add(v.index)
        for v in node.writes:
            if v.index not in made and v is not result:
                return False  # writes into memory the chain did not make
    for node in chain:
        for v in node.outputs:
            if v is result:
                continue
            if v.storage.escapes or last.get(v.storage, -1) >= after or v.storage.kind != "temp":
                return False
    if result.index not in made:
        return False
    written = {v.storage for n in chain for v in (*n.outputs, *n.writes)}
    return all(len(storages_of[s]) == 1 for s in written)


def fuse_elementwise(graph: Graph, context: Any) -> None:
    """Fuse chains of elementwise ufuncs on large arrays into blocked loops."""
    out: list[Node] = []
    i = 0
    fused = 0
    last = _last_reads(graph)
    while i < len(graph.nodes):
        found = _try_chain(graph, i, last)
        if found is None:
            out.append(graph.nodes[i])
            i += 1
            continue
        chain, result = found
        made = {v.index for n in chain for v in n.outputs}
        inputs: list[Value] = []
        for node in chain:
            for v in node.reads:
                if v.index not in made and v not in inputs and v is not result:
                    inputs.append(v)
        kernel = _build(chain, inputs, result)
        node = Node("call", kernel, None, tuple(inputs), {}, reads=tuple(inputs))
        node.label, node.where = repr(kernel), chain[0].where
        node.outputs = (result,)
        node.meta["accepts_out"] = True
        result.producer = node
        out.append(node)
        fused += len(chain)
        i += len(chain)
    graph.nodes = out
    if fused:
        graph.notes.append(f"fuse_elementwise: {fused} calls in blocked loops")
