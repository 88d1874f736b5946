"""A GELU's output computed again for the backward instead of kept from the forward.

A GPT block's MLP keeps two arrays of (tokens, 4 x width) from its forward for its backward:
the GELU's input ``h`` (for the GELU's backward) and its output (for ``c_proj``'s weight
gradient). Both are alive together at the busiest point of a training step, the start of the
backward, in every block. The output is recomputed from ``h`` by the same kernel right before
that one late read, so between the forward's use and the backward only ``h`` is kept: for
GPT-M (4 blocks, batch 32 x 128 tokens, 512 hidden) 32 MiB fewer at the busiest node, for
~2 ms per block of elementwise work. The same bits: one kernel on the same ``h``.

Only where it cannot cost memory or change a value: ``h`` is read after the late read anyway
(the GELU's backward) and nothing writes it in between; the output is read late only through
views made in the forward, which are made again over the new memory.
"""

from __future__ import annotations

from sadl_kernels._api import Graph, Node, Value, map_values, new_node, new_value
from sadl_kernels._bias import gelu_forward_bias_into
from sadl_kernels._gelu import gelu_forward_into
from sadl_kernels._match import func_name, touches

__all__ = ["recompute_gelu_outputs"]

#: Nodes between the forward's last read of a GELU's output and a later read that make the
#: later one a backward's (a forward block's MLP is some tens of nodes).
GAP = 200


def _late_reads(graph: Graph, i: int, out: Value) -> list[int] | None:
    """The nodes after the gap that read ``out``'s memory, when they only read it through
    values made before the gap; None otherwise.
    """
    s = out.storage
    touching = [j for j in range(i + 1, len(graph.nodes)) if touches(graph.nodes[j], s)]
    if not touching:
        return None
    previous = i
    for k, j in enumerate(touching):
        if j - previous > GAP:
            late = touching[k:]
            for j2 in late:
                node = graph.nodes[j2]
                if node.kind != "call" or "source" in node.meta:
                    return None
                if any(v.storage is s for v in (*node.writes, *node.outputs)):
                    return None
            return late
        previous = j
    return None


def _h_kept(graph: Graph, i: int, h: Value, last_late: int) -> bool:
    """``h`` is read after ``last_late`` and written by nothing after node ``i`` until then."""
    s = h.storage
    for j in range(i + 1, len(graph.nodes)):
        node = graph.nodes[j]
        if j <= last_late and any(v.storage is s for v in (*node.writes, *node.outputs)):
            return False
        if j > last_late and any(v.storage is s for v in node.reads):
            return True
    return False


def _remade(
    graph: Graph, value: Value, out: Value, made: dict[Value, Value], nodes: list[Node]
) -> Value | None:
    """``value`` (``out`` or a view of it) over the new memory, its view nodes appended."""
    if value in made:
        return made[value]
    node = value.producer
    if node is None or len(node.outputs) != 1 or node.kind != "call" or node.writes:
        return None
    sources = [v for v in node.reads if v.storage is out.storage]
    remade = {v: _remade(graph, v, out, made, nodes) for v in sources}
    if any(r is None for r in remade.values()):
        return None
    copy = new_value(graph, value, storage=made[out].storage)

    def swap(v: Value) -> Value:
        return remade.get(v) or v

    nodes.append(
        new_node(
            node,
            args=map_values(node.args, swap),
            kwargs=map_values(node.kwargs, swap),
            reads=tuple(swap(v) for v in node.reads),
            outputs=(copy,),
        )
    )
    copy.producer = nodes[-1]
    made[value] = copy
    return copy


def _recompute(graph: Graph, i: int) -> bool:
    """Recompute the output of the GELU kernel at node ``i`` before its late read, if that
    qualifies; whether it did.
    """
    node = graph.nodes[i]
    h, out = node.args[0], node.args[-1]
    empty = out.producer
    s = out.storage
    if s.kind != "temp" or s.escapes or s.root is not out or empty is None:
        return False
    if empty.kind != "call" or empty.reads or empty.writes or func_name(empty) != "empty":
        return False
    late = _late_reads(graph, i, out)
    if late is None or not _h_kept(graph, i, h, late[-1]):
        return False
    reads = {v for j in late for v in graph.nodes[j].reads if v.storage is s}
    if any(v is not out and v.producer is None for v in reads):
        return False
    fresh = new_value(graph, out)
    made: dict[Value, Value] = {out: fresh}
    nodes = [
        new_node(empty, outputs=(fresh,)),
        new_node(
            node,
            func=gelu_forward_into,
            args=(h, fresh),
            reads=(h, fresh),  # every value leaf, as the tracer records them
            writes=(fresh,),
            label="kernel[gelu recomputed]",
        ),
    ]
    fresh.producer = nodes[0]
    if any(_remade(graph, v, out, made, nodes) is None for v in reads):
        return False  # (the values made stay unused: no node reads them)

    def swap(v: Value) -> Value:
        return made.get(v, v)

    for j in late:  # changed in place: their outputs' producer stays the node
        old = graph.nodes[j]
        old.args, old.kwargs = map_values(old.args, swap), map_values(old.kwargs, swap)
        old.reads = tuple(swap(v) for v in old.reads)
    graph.nodes[late[0] : late[0]] = nodes
    return True


def recompute_gelu_outputs(graph: Graph) -> int:
    """Recompute before its late read each GELU kernel's output that qualifies; the count."""
    kernels = (gelu_forward_into, gelu_forward_bias_into)
    done = 0
    for i in range(len(graph.nodes)):  # (nodes are inserted only after the kernels met so far)
        if i < len(graph.nodes) and graph.nodes[i].func in kernels:
            done += _recompute(graph, i)
    return done
