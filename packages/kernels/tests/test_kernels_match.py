"""Where a value lies in its memory (the bias fold's check): the elements a view spans."""

from __future__ import annotations

import numpy as np
import sadl
from sadl_kernels._match import extent


def _graph_of(fn, *arrays):
    compiled = sadl.compile(fn)
    compiled(*arrays)
    return compiled


def test_views_of_one_buffer_span_the_elements_of_their_rows():
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
