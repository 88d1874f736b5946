"""Core's simplifying passes: constant folding, dead-code elimination, common subexpressions.

A pass is ``run(graph, context) -> None`` and edits the graph in place (the records are
``CompilePassDef``, registered by core's built-in plugin and by any plugin through
``register_compile_passes``). Each keeps results identical to eager, bit for bit: nothing is
computed differently, only less often.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl_compile.ir import Graph, Node, OpRegion, Storage, Value, iter_values, map_values

__all__ = ["common_subexpressions", "dead_code", "dead_code_final", "fold_constants", "substitute"]


def fold_constants(graph: Graph, context: Any) -> None:
    """Drop the calls whose results depend on no input, parameter or random draw.

    The tracer ran them and kept their results (``Value.array``); replay uses those arrays. A
    constant that is handed out (returned, stored as a gradient) is copied on each call, so the
    caller never shares memory with the compiled function.
    """
    kept: list[Node] = []
    folded = 0
    for node in graph.nodes:
        if (
            node.kind == "call"
            and node.const
            and all(v.storage.const for v in node.outputs)
            and all(v.storage.const for v in node.writes)
        ):
            folded += 1
            continue
        kept.append(node)
    graph.nodes = kept
    if folded:
        graph.notes.append(f"fold_constants: {folded} calls computed once, while compiling")


def dead_code(graph: Graph, context: Any) -> None:
    """Drop calls whose results nothing needs (walking backwards, memory by memory).

    A call is needed when it is an effect (gradient assignment, optimizer step, random draw,
    guard), when it writes into memory that outlives the call (a ``.grad`` or ``.data``
    assigned in the call included), or when something needed later reads memory it produces
    or writes.
    """
    _drop_overwritten_grads(graph)
    live: set[Storage] = {v.storage for v in iter_values(graph.outputs)}
    for storage in graph.storages:
        if storage.kind != "temp":
            live.add(storage)
    for node in graph.nodes:  # memory handed out as a .grad or .data: later writes are seen
        if node.kind in ("set_grad", "set_data"):
            live.update(v.storage for v in node.reads)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        needed = (
            node.is_effect
            or any(v.storage in live for v in node.outputs)
            or any(v.storage in live for v in node.writes)
        )
        if not needed:
            continue
        kept.append(node)
        for v in node.reads:
            live.add(v.storage)
        source = node.meta.get("source")
        if source is not None:
            for v in source.reads:
                live.add(v.storage)
    removed = len(graph.nodes) - len(kept)
    kept.reverse()
    graph.nodes = kept
    if removed:
        graph.notes.append(f"dead_code: {removed} calls removed")


def dead_code_final(graph: Graph, context: Any) -> None:
    """:func:`dead_code` again, after the passes that rewrite calls (fusion, kernels, flat
    optimizer steps) left calls whose results nothing reads any more.
    """
    dead_code(graph, context)


def _tensor_key(ref: Any) -> Any:
    return ref if isinstance(ref, tuple) else id(ref())


def _drop_overwritten_grads(graph: Graph) -> None:
    """A ``.grad`` assignment that a later one replaces before anything reads the attribute
    (``zero_grad()`` then ``backward()``) has no effect: drop it. Optimizer steps read it.
    """
    pending: dict[Any, Node] = {}
    dead: set[int] = set()
    for node in graph.nodes:
        if node.kind == "set_grad":
            key = _tensor_key(node.meta["tensor"])
            if key in pending:
                dead.add(id(pending[key]))
            pending[key] = node
        elif node.kind in ("optimizer", "set_data"):
            pending.clear()
    if dead:
        graph.nodes = [n for n in graph.nodes if id(n) not in dead]


#: Calls that copy their first argument (or may: a reshape of a strided view). A copy made
#: again costs about what reading a kept one costs, both moving its bytes; keeping a large one
#: from the forward to the backward (im2col columns) would only hold its memory all that time.
_COPYING: frozenset[Any] = frozenset(
    {
        np.ndarray.reshape,
        np.reshape,
        np.ndarray.ravel,
        np.ravel,
        np.ndarray.flatten,
        np.ndarray.copy,
        np.copy,
        np.ascontiguousarray,
    }
)
#: Copies from this size on are made again rather than merged.
COPY_MERGE_LIMIT = 1 << 20


def _large_copy(node: Node) -> bool:
    """A call of :data:`_COPYING` that copied (its result is memory none of its reads own)."""
    if node.key not in _COPYING:
        return False
    read = {r.storage for r in node.reads}
    return any(v.storage not in read and v.nbytes >= COPY_MERGE_LIMIT for v in node.outputs)


def _hashable(tree: Any) -> Any:
    """A hashable stand-in for an argument template (Values by index); raises TypeError."""
    if type(tree) is Value:
        return ("%", tree.index)
    if isinstance(tree, tuple | list):
        return (type(tree).__name__, *(_hashable(x) for x in tree))
    if isinstance(tree, dict):
        return ("{", *((k, _hashable(v)) for k, v in tree.items()))
    if isinstance(tree, slice):
        return ("slice", tree.start, tree.stop, tree.step)
    if hasattr(tree, "shape") and hasattr(tree, "dtype"):
        raise TypeError("arrays are compared by value, not merged")
    hash(tree)
    return (type(tree).__name__, tree)


def common_subexpressions(graph: Graph, context: Any) -> None:
    """Compute a call once when the same call on the same values appears again.

    Only pure calls merge: no writes, no draws, and outputs that nothing writes into later and
    that are not handed out (two arrays returned by the function stay two arrays). A write into
    memory a recorded call read forgets that call. Large copies (:data:`COPY_MERGE_LIMIT`) are
    made again: merged, the first would stay alive until the last reader of the second.
    """
    written = {v.storage for n in graph.nodes for v in n.writes}
    seen: dict[Any, Node] = {}
    by_storage: dict[Storage, list[Any]] = {}
    replace: dict[Value, Value] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        for v in node.writes:
            for key in by_storage.pop(v.storage, ()):
                seen.pop(key, None)
        if node.kind != "call" or node.writes or not node.outputs or node.meta.get("dynamic"):
            kept.append(node)
            continue
        if _large_copy(node) or any(
            v.storage.escapes or (v.storage in written and v.storage.root is v)
            for v in node.outputs
        ):
            kept.append(node)
            continue
        try:
            args = map_values(node.args, lambda v: replace.get(v, v))
            kwargs = map_values(node.kwargs, lambda v: replace.get(v, v))
            key = (node.key, _hashable(args), _hashable(kwargs))
            hash(key)
        except TypeError:
            kept.append(node)
            continue
        first = seen.get(key)
        if first is not None and len(first.outputs) == len(node.outputs):
            for old, new in zip(node.outputs, first.outputs):
                replace[old] = new
            continue
        seen[key] = node
        for v in node.reads:
            by_storage.setdefault(replace.get(v, v).storage, []).append(key)
        kept.append(node)
    graph.nodes = kept
    if replace:
        substitute(graph, replace)
        graph.notes.append(f"common_subexpressions: {len(replace)} values computed once")


def substitute(graph: Graph, replace: dict[Value, Value]) -> None:
    """Use ``replace[v]`` wherever the graph reads ``v`` (nodes, guards, op regions, outputs)."""

    def swap(v: Value) -> Value:
        return replace.get(v, v)

    regions: dict[int, OpRegion] = {}
    for node in graph.nodes:
        region = node.region
        while region is not None and id(region) not in regions:
            regions[id(region)] = region
            region = region.parent
    for region in regions.values():
        region.inputs = map_values(region.inputs, swap)
        region.params = map_values(region.params, swap)
        region.outputs = map_values(region.outputs, swap)
    for node in graph.nodes:
        node.args = map_values(node.args, swap)
        node.kwargs = map_values(node.kwargs, swap)
        node.reads = tuple(swap(v) for v in node.reads)
        node.writes = tuple(swap(v) for v in node.writes)
        source = node.meta.get("source")
        if source is not None:
            source.args = map_values(source.args, swap)
            source.kwargs = map_values(source.kwargs, swap)
            source.reads = tuple(swap(v) for v in source.reads)
    graph.outputs = map_values(graph.outputs, swap)
