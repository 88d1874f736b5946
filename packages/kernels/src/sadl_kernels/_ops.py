"""Kernels for recorded op applications, by the op's registered name.

sadl.compile marks the calls each op application made (``Node.region``, an ``OpRegion`` naming
the registered ``OpDef`` with its inputs, parameters and outputs). :func:`op_kernels` finds the
applications of the ops in :data:`OP_KERNELS` (layer norm, RMS norm, GELU and their backward
ops) and
replaces the calls each made with one kernel call computing the op's result from the op's inputs,
whatever NumPy calls the op's implementation makes inside. The calls that allocate the result
and view it stay; every other call of the region goes, so the replacement is refused (the calls
kept) when anything outside the region reads an array only the region's dropped calls made.
Recognition happens once, while compiling; a replay calls the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_kernels._api import Graph, Node, OpRegion, Value, new_node
from sadl_kernels._gelu import GELU_KERNELS
from sadl_kernels._match import contiguous
from sadl_kernels._norm import NORM_KERNELS

__all__ = ["OP_KERNELS", "SWITCHES", "op_kernels", "replace_application"]

#: For each registered op name, ``kernel(region)``: ``(function, arguments, result value)``
#: for an application the kernel handles, None for one it does not (left to the op's code).
OP_KERNELS: dict[str, Callable[[OpRegion], Any]] = {**NORM_KERNELS, **GELU_KERNELS}


def _regions(graph: Graph) -> list[OpRegion]:
    found: dict[int, OpRegion] = {}
    for node in graph.nodes:
        r = node.region
        while r is not None:
            if r.phase == "forward" and r.op.name in OP_KERNELS:
                found.setdefault(id(r), r)
            r = r.parent
    return list(found.values())


def replace_application(
    graph: Graph, region: OpRegion, func: Callable[..., None], args: tuple[Any, ...], out: Value
) -> bool:
    """Replace the calls ``region`` made by ``func(*args)``, which writes the op's result
    ``out`` (its whole allocation) from the values in ``args``; False (the graph unchanged) when
    something outside the region reads memory only the region's dropped calls made.
    """
    nodes = graph.nodes
    inside = [i for i, n in enumerate(nodes) if _within(n, region)]
    if not inside or out.storage.kind != "temp":
        return False
    root = out.storage.root
    if root is None or root.nbytes != out.nbytes:
        return False
    kept = [i for i in inside if _allocates(nodes[i], out)]
    dropped = [i for i in inside if i not in set(kept)]
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
    args = tuple(root if a is out else a for a in args)
    inputs = tuple(dict.fromkeys(a for a in args if type(a) is Value and a is not root))
    if any(v.storage is out.storage for v in inputs):
        return False
    reads = (*inputs, root)  # as every kernel node: the written values are among its reads
    at = nodes.index(root.producer)
    for i in remade:  # the result made from the region's own arrays (a cast back): now memory
        nodes[i] = root.producer = new_node(
            nodes[i],
            func=np.empty,
            key=np.empty,
            args=(root.shape,),
            kwargs={"dtype": root.dtype},
            reads=(),
            writes=(),
            label="empty",
        )
    kernel = new_node(
        nodes[at],
        kind="call",
        func=func,
        key=("sadl_kernels", region.op.name),
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


#: The switch (``SADL_KERNELS_DISABLE``) that turns each op's kernel off.
SWITCHES = {
    "layer_norm": "layer_norm",
    "rms_norm": "layer_norm",
    "layer_norm_backward": "layer_norm",
    "gelu": "gelu",
    "gelu_backward": "gelu",
}


def op_kernels(graph: Graph, enabled: Callable[[str], bool]) -> dict[str, int]:
    """Replace each recorded application that its op's kernel handles (and whose switch
    ``enabled`` allows); counts by op name.
    """
    counts: dict[str, int] = {}
    for region in _regions(graph):
        if not enabled(SWITCHES.get(region.op.name, region.op.name)):
            continue
        found = OP_KERNELS[region.op.name](region)
        if found is not None and replace_application(graph, region, *found):
            counts[region.op.name] = counts.get(region.op.name, 0) + 1
    return counts
