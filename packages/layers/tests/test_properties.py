"""Property tests: the fused ops agree with naive loop implementations over random geometries."""

from __future__ import annotations

import math

import numpy as np
import sadl
from hypothesis import given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=30, deadline=None)


def _naive_conv2d(x, w, b, stride, padding, dilation, groups):
    N, C, H, W = x.shape
    n_out, Cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    Ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    Wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((N, n_out, Ho, Wo))
    og = n_out // groups
    for o in range(n_out):
        g = o // og
        for i in range(Ho):
            for j in range(Wo):
                patch = xp[:, g * Cg : (g + 1) * Cg, i * sh : i * sh + dh * kh : dh][
                    ..., j * sw : j * sw + dw * kw : dw
                ]
                out[:, o, i, j] = np.sum(patch * w[o], axis=(1, 2, 3))
    return out if b is None else out + b[None, :, None, None]


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 2]))
    C = groups * draw(st.integers(1, 2))
    n_out = groups * draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    H = draw(st.integers(dilation[0] * (kh - 1) + 1, 7))
    W = draw(st.integers(dilation[1] * (kw - 1) + 1, 7))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((draw(st.integers(1, 2)), C, H, W))
    w = rng.standard_normal((n_out, C // groups, kh, kw))
    b = rng.standard_normal(n_out) if draw(st.booleans()) else None
    return x, w, b, stride, padding, dilation, groups


@SETTINGS
@given(conv_cases())
def test_conv2d_matches_naive_loops(case):
    x, w, b, stride, padding, dilation, groups = case
    got = sadl.ops.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    want = _naive_conv2d(x, w, b, stride, padding, dilation, groups)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@st.composite
def pool_cases(draw):
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2)))
    H, W = draw(st.integers(kh, 7)), draw(st.integers(kw, 7))
    x = np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal((1, 2, H, W))
    return x, (kh, kw), stride, padding


@SETTINGS
@given(pool_cases())
def test_pools_match_naive_loops(case):
    x, (kh, kw), (sh, sw), (ph, pw) = case
    H, W = x.shape[-2:]
    Ho, Wo = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    neg = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
    zero = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    want_max = np.empty((1, 2, Ho, Wo))
    want_avg = np.empty((1, 2, Ho, Wo))
    want_avg_exclusive = np.empty((1, 2, Ho, Wo))
    ones = np.pad(np.ones((H, W)), ((ph, ph), (pw, pw)))
    for i in range(Ho):
        for j in range(Wo):
            rows, cols = slice(i * sh, i * sh + kh), slice(j * sw, j * sw + kw)
            want_max[..., i, j] = neg[..., rows, cols].max(axis=(-1, -2))
            total = zero[..., rows, cols].sum(axis=(-1, -2))
            want_avg[..., i, j] = total / (kh * kw)
            want_avg_exclusive[..., i, j] = total / ones[rows, cols].sum()
    kwargs = {"kernel_size": (kh, kw), "stride": (sh, sw), "padding": (ph, pw)}
    np.testing.assert_allclose(sadl.ops.max_pool2d(x, **kwargs), want_max)
    np.testing.assert_allclose(sadl.ops.avg_pool2d(x, **kwargs), want_avg, rtol=1e-12)
    np.testing.assert_allclose(
        sadl.ops.avg_pool2d(x, count_include_pad=False, **kwargs), want_avg_exclusive, rtol=1e-12
    )


@SETTINGS
@given(
    tq=st.integers(1, 6),
    extra=st.integers(0, 4),
    d=st.integers(1, 4),
    heads=st.integers(1, 3),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_attention_matches_naive_softmax(tq, extra, d, heads, causal, seed):
    tk = tq + extra
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((heads, tq, d))
    k = rng.standard_normal((heads, tk, d))
    v = rng.standard_normal((heads, tk, 2))
    got = sadl.ops.scaled_dot_product_attention(q, k, v, causal=causal)
    want = np.empty_like(got)
    for h in range(heads):
        for i in range(tq):
            visible = tk - tq + i + 1 if causal else tk
            s = [float(q[h, i] @ k[h, j]) / math.sqrt(d) for j in range(visible)]
            m = max(s)
            e = [math.exp(x - m) for x in s]
            want[h, i] = sum(ej * v[h, j] for j, ej in enumerate(e)) / sum(e)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    n_in=st.integers(1, 5),
    n_out=st.integers(1, 5),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_linear_matches_numpy_for_any_leading_dims(lead, n_in, n_out, bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*lead, n_in))
    w = rng.standard_normal((n_out, n_in))
    b = rng.standard_normal(n_out) if bias else None
    want = x @ w.T + (0 if b is None else b)
    np.testing.assert_allclose(sadl.ops.linear(x, w, b), want, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(
    rows=st.integers(1, 4),
    classes=st.integers(1, 6),
    shift=st.floats(-500, 500),
    smoothing=st.sampled_from([0.0, 0.1, 0.5]),
    seed=st.integers(0, 2**16),
)
def test_cross_entropy_is_shift_invariant_and_non_negative(rows, classes, shift, smoothing, seed):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((rows, classes)) * 3
    t = rng.integers(0, classes, size=rows)
    base = sadl.ops.cross_entropy(z, t, label_smoothing=smoothing, reduction="none")
    moved = sadl.ops.cross_entropy(z + shift, t, label_smoothing=smoothing, reduction="none")
    np.testing.assert_allclose(base, moved, rtol=1e-9, atol=1e-9)
    assert (base >= -1e-12).all()
