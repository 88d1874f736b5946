"""The matcher's safety rules: what a pattern may replace and when outputs may share memory."""

from __future__ import annotations

import numpy as np
import sadl
from kernel_cases import kernels_in
from sadl_kernels._match import disjoint, extent


def _graph_of(fn, *arrays):
    compiled = sadl.compile(fn)
    compiled(*arrays)
    return compiled


def test_views_of_one_buffer_are_disjoint_only_where_their_rows_are():
    seen: dict[tuple[int, ...], list] = {}

    def step(x):
        flat = np.empty(40, np.float32)
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


def test_a_gelu_like_chain_with_other_constants_is_still_exact_math():
    """The GELU pattern captures its constants: a chain with other constants (not sadl-layers'
    GELU) is the same arithmetic with those constants, so the kernel computes it too."""

    def chain(x):
        s = np.empty_like(x)
        out = np.empty_like(x)
        np.multiply(x, x, out=s)
        s *= 0.1
        s += 0.5
        s *= x
        np.tanh(s, out=s)
        s += 1.0
        np.multiply(s, x, out=out)
        out *= 0.5
        return out

    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    compiled = sadl.compile(chain)
    compiled(x)
    got = compiled(x)
    assert kernels_in(compiled, "gelu") == 1
    np.testing.assert_allclose(got, chain(x), atol=1e-6, rtol=1e-6)
