"""An independent check of a compiled graph's memory plan: no two planned arrays in use at the
same node share a byte, but an elementwise result written over the operand that dies there.
"""

from __future__ import annotations

import numpy as np
from sadl_compile.memory import _last_uses

_byte_bounds = getattr(np.lib, "array_utils", np).byte_bounds


def assert_plan_disjoint(graph) -> int:
    """Raise AssertionError naming the first overlap; returns the planned arrays checked.

    A planned array is a temporary whose owning value holds its memory (``array``) after
    compiling; it is in use from the first node that touches its memory to the last.
    """
    last = _last_uses(graph)
    first: dict = {}
    for i, node in enumerate(graph.nodes):
        for v in (*node.reads, *node.writes, *node.outputs):
            s = v.storage
            owner = s.root is v or (s.root is None and v.array is not None)
            if s.kind == "temp" and not s.const and owner and v.array is not None:
                first.setdefault(s, (i, v, node))
    spans = []  # (first node, last node, low address, high address, value, node)
    for s, (i, v, node) in first.items():
        low, high = _byte_bounds(v.array)
        spans.append((i, last.get(s, i), low, high, v, node))
    spans.sort(key=lambda span: span[0])
    for k, (start, end, low, high, v, node) in enumerate(spans):
        for start2, _end2, low2, high2, v2, node2 in spans[k + 1 :]:
            if start2 > end:
                break
            if low2 >= high or low >= high2:
                continue
            in_place = start2 == end and any(r.storage is v.storage for r in node2.reads)
            assert in_place, (
                f"memory plan: {v} ({node.label}, nodes {start}..{end}) and {v2} "
                f"({node2.label}, from node {start2}) share memory while both are in use"
            )
    return len(spans)
