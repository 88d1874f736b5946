"""Editing a graph by op application: find the recorded applications of an op, replace the
calls one made by a single call (a kernel).

The tracer marks each call with the innermost op application that made it (``Node.region``,
an :class:`~sadl_compile.ir.OpRegion`); these are the public tools a pass (sadl-kernels', or a
third party's) uses to work on ops by name rather than on NumPy call sequences. Used while
compiling only: a replay runs the graph as the passes left it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_compile.ir import Graph, Node, OpRegion, Value

__all__ = ["contiguous", "op_regions", "replace_region"]


def op_regions(graph: Graph, names: Any = None, phase: str = "forward") -> list[OpRegion]:
    """The recorded applications (nested ones included) of the ops named in ``names`` (all
    ops when None) in ``phase`` (``"forward"``, ``"backward"``), in the order they began.
    """
    found: dict[int, OpRegion] = {}
    for node in graph.nodes:
        chain: list[OpRegion] = []
        r = node.region
        while r is not None and id(r) not in found:
            chain.append(r)
            r = r.parent
        for r in reversed(chain):  # outer applications began first
            found[id(r)] = r
    return [r for r in found.values() if r.phase == phase and (names is None or r.op.name in names)]


def contiguous(v: Value) -> bool:
    """C-contiguous strides for its shape (dimensions of one element may have any stride)."""
    stride = v.dtype.itemsize
    for n, s in zip(reversed(v.shape), reversed(v.strides)):
        if n != 1 and s != stride:
            return False
        stride *= n
    return True


def replace_region(
    graph: Graph,
    region: OpRegion,
    func: Callable[..., None],
    args: tuple[Any, ...],
    out: Value,
    owner: str = "kernel",
) -> bool:
    """Replace the calls ``region`` made by one call ``func(*args)`` that writes the op's
    result ``out`` in place (all of it) from the values among ``args``.

    The calls that allocate the result's memory or view it stay (the memory plan gives the
    allocation a buffer); every other call of the region goes. Returns False, the graph
    unchanged, when that is not safe: the result is not a temporary array wholly written by
    ``func``, or something outside the region (or the function's outputs) reads memory only the
    dropped calls made. ``func`` receives the allocation in place of ``out`` (same memory, its
    own shape: reshape inside). The new node is labelled ``kernel[<op name>]`` and keyed
    ``(owner, op name)``.
    """
    nodes = graph.nodes
    inside = [i for i, n in enumerate(nodes) if _within(n, region)]
    if not inside or out.storage.kind != "temp":
        return False
    root = out.storage.root
    if root is None or root.nbytes != out.nbytes:
        return False
    kept = [i for i in inside if _allocates(nodes[i], out)]
    keep = set(kept)
    dropped = [i for i in inside if i not in keep]
    region_nodes = {id(nodes[i]) for i in inside}
    made = {  # memory the region allocated (views of earlier arrays are not the region's)
        v.storage
        for i in dropped
        for v in nodes[i].outputs
        if v.storage.root is not None and id(v.storage.root.producer) in region_nodes
    }
    made.discard(out.storage)
    written = {v.storage for i in dropped for v in nodes[i].writes}
    if not written <= made | {out.storage} or any(s.kind != "temp" or s.escapes for s in made):
        return False
    if any(v.storage in made for v in graph.output_values()):
        return False
    outside = set(range(len(nodes))) - set(inside)
    if any(v.storage in made for i in outside for v in nodes[i].reads):
        return False
    remade = [i for i in kept if any(v.storage in made for v in nodes[i].reads)]
    if any(nodes[i] is not root.producer for i in remade):
        return False  # a kept view of memory the kernel does not write
    # the kernel writes the allocation itself (views of it may be hoisted by the memory plan)
    if root.producer is None or root.producer not in [nodes[i] for i in kept]:
        return False
    if not contiguous(root) or root.dtype != out.dtype:
        return False
    if root.producer.reads and nodes.index(root.producer) not in remade:
        # the result computed from arrays outside the region (``x - max`` of a max another
        # application computed, shared by common_subexpressions): the kernel writes it whole
        remade.append(nodes.index(root.producer))
    args = tuple(root if a is out else a for a in args)
    inputs = tuple(dict.fromkeys(a for a in args if type(a) is Value and a is not root))
    if any(v.storage is out.storage for v in inputs):
        return False
    reads = (*inputs, root)  # as every kernel node: the written values are among its reads
    at = nodes.index(root.producer)
    for i in remade:  # the result made from other arrays (a cast back): now only memory
        nodes[i] = root.producer = dataclasses.replace(
            nodes[i],
            meta={},
            func=np.empty,
            key=np.empty,
            args=(root.shape,),
            kwargs={"dtype": root.dtype},
            reads=(),
            writes=(),
            label="empty",
        )
    kernel = dataclasses.replace(
        nodes[at],
        meta={},
        kind="call",
        func=func,
        key=(owner, region.op.name),
        args=args,
        kwargs={},
        outputs=(),
        reads=reads,
        writes=(root,),
        label=f"kernel[{region.op.name}]",
        const=False,
    )
    drop = set(dropped)
    graph.nodes = [n for i, n in enumerate(nodes) if i not in drop and i <= at]
    graph.nodes.append(kernel)
    graph.nodes += [n for i, n in enumerate(nodes) if i not in drop and i > at]
    return True


def _within(node: Node, region: OpRegion) -> bool:
    r = node.region
    while r is not None and r is not region:
        r = r.parent
    return r is region


def _allocates(node: Node, out: Value) -> bool:
    """A call that only makes the result's memory or views it (kept: the kernel writes it)."""
    return (
        node.kind == "call"
        and not node.writes
        and bool(node.outputs)
        and all(v.storage is out.storage for v in node.outputs)
    )
