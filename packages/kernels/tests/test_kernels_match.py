"""The matcher's safety rules: what a pattern may replace and when outputs may share memory."""

from __future__ import annotations

import numpy as np
import sadl
from sadl_kernels._match import disjoint, extent


def _graph_of(fn, *arrays):
    compiled = sadl.compile(fn)
    compiled(*arrays)
    return compiled


def test_views_of_one_buffer_are_disjoint_only_where_their_rows_are():
    seen: dict[tuple[int, ...], list] = {}

    def step(x):
        flat = np.zeros(40, np.float32)  # np.zeros: seen while tracing (docs/compile.md)
        a = flat[0:16].reshape(4, 4)
        b = flat[16:40].reshape(6, 4)
        c = flat[8:24]
        a[...] = x
        b[...] = 1
        c[...] = 2
        return flat

    compiled = _graph_of(step, np.ones((4, 4), np.float32))
    graph = compiled._last.graph  # diagnostic access: the traced values
    for v in graph.values:
        seen.setdefault(v.shape, []).append(v)
    a, b, c = seen[(4, 4)][-1], seen[(6, 4)][-1], seen[(16,)][-1]  # the last: flat[8:24]
    assert extent(a) == (0, 16) and extent(b) == (16, 40) and extent(c) == (8, 24)
    assert disjoint(a, b) and not disjoint(a, c) and not disjoint(b, c)
