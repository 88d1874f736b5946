"""conv2d makes its im2col columns a block of images at a time, never for the whole batch.

With a column budget of a few bytes every image is its own block: the forward and the input
gradient are bit-identical to one block (each image's GEMM is the same), the weight gradient
equal to rounding, float64 gradients (second order too) pass gradcheck, and torch agrees.
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck
from sadl_layers.ops import conv as conv_module

CASES = [  # (x shape, w shape, params)
    ((5, 3, 7, 6), (4, 3, 3, 3), {}),
    ((4, 4, 8, 8), (6, 2, 3, 2), {"stride": 2, "padding": 1, "groups": 2}),
    ((3, 2, 9, 9), (2, 2, 3, 3), {"dilation": 2, "padding": "same"}),
]


def _run(x, w, b, params):
    xt, wt, bt = (sadl.tensor(a, requires_grad=True) for a in (x, w, b))
    out = sadl.ops.conv2d(xt, wt, bt, **params)
    g = np.random.default_rng(3).standard_normal(out.shape)
    (out * sadl.tensor(g)).sum().backward()
    return out.numpy(), xt.grad, wt.grad, bt.grad


def _inputs(x_shape, w_shape, dtype=np.float64):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal(x_shape).astype(dtype),
        rng.standard_normal(w_shape).astype(dtype),
        rng.standard_normal(w_shape[0]).astype(dtype),
    )


@pytest.mark.parametrize(("x_shape", "w_shape", "params"), CASES)
def test_blocks_of_one_image_equal_one_block(monkeypatch, x_shape, w_shape, params) -> None:
    x, w, b = _inputs(x_shape, w_shape)
    whole = _run(x, w, b, params)
    monkeypatch.setattr(conv_module, "COLUMN_BYTES", 1)  # one image per block
    assert len(conv_module._blocks(x_shape[0], 1000)) == x_shape[0]
    blocked = _run(x, w, b, params)
    np.testing.assert_array_equal(blocked[0], whole[0])  # forward
    np.testing.assert_array_equal(blocked[1], whole[1])  # input gradient
    np.testing.assert_allclose(blocked[2], whole[2], rtol=1e-13, atol=1e-13)  # weight gradient
    np.testing.assert_array_equal(blocked[3], whole[3])


def test_the_blocks_cover_the_batch_within_the_budget(monkeypatch) -> None:
    monkeypatch.setattr(conv_module, "COLUMN_BYTES", 3000)
    blocks = conv_module._blocks(10, 1000)
    assert [(s.start, s.stop) for s in blocks] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert [(s.start, s.stop) for s in conv_module._blocks(0, 1000)] == [(0, 0)]
    assert len(conv_module._blocks(4, 10**9)) == 4  # an image larger than the budget: one each


@pytest.mark.parametrize(("x_shape", "w_shape", "params"), CASES[:2])
def test_blocked_conv2d_passes_float64_gradcheck_to_second_order(
    monkeypatch, x_shape, w_shape, params
) -> None:
    monkeypatch.setattr(conv_module, "COLUMN_BYTES", 1)
    small = (2, *x_shape[1:3], 5)
    x, w, b = _inputs(small, w_shape)
    assert gradcheck(lambda x, w, b: sadl.ops.conv2d(x, w, b, **params), x, w, b)

    def grad_of_input(x, w):  # the input gradient's own gradients (conv2d's family)
        xt = x if isinstance(x, sadl.Tensor) else sadl.tensor(x)
        out = sadl.ops.conv2d(xt, w, None, **params)
        (gx,) = sadl.grad((out * out).sum(), [xt], create_graph=True)
        return gx

    assert gradcheck(grad_of_input, x, w)


def test_blocked_conv2d_matches_torch(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(conv_module, "COLUMN_BYTES", 5000)  # a few images per block
    x, w, b = _inputs((9, 3, 10, 10), (5, 3, 5, 5))
    ours = _run(x, w, b, {"padding": 1})
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    out = torch.nn.functional.conv2d(xt, wt, bt, padding=1)
    g = np.random.default_rng(3).standard_normal(tuple(out.shape))
    (out * torch.tensor(g)).sum().backward()
    for mine, theirs in zip(ours, (out, xt.grad, wt.grad, bt.grad), strict=True):
        np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-10, atol=1e-10)


def test_compiled_input_gradient_does_not_grow_with_the_column_blocks(monkeypatch) -> None:
    """The input gradient costs a few recorded calls per block of columns (a stride-1 one is
    the forward's GEMM on the padded output gradient), never kh * kw per block: a traced step
    of a batch of many column blocks stays small."""
    pytest.importorskip("sadl_compile")
    x, w, _ = _inputs((16, 2, 6, 6), (3, 2, 3, 3))
    image_columns = 2 * 3 * 3 * 4 * 4 * 8  # C * kh * kw * Ho * Wo float64s: one image a block
    monkeypatch.setattr(conv_module, "COLUMN_BYTES", image_columns)
    assert len(conv_module._blocks(16, image_columns)) == 16
    weight = sadl.tensor(w)

    def step(a):
        xt = sadl.tensor(a, requires_grad=True)
        out = sadl.ops.conv2d(xt, weight, None)
        (out * out).sum().backward()
        return xt.grad

    run = sadl.compile(step)
    run(x)
    got = run(x)
    assert run.stats.replays == 1
    np.testing.assert_array_equal(np.asarray(got), np.asarray(step(x)))
    calls = sum(1 for node in run.graph.nodes if node.kind == "call")
    assert calls < 16 * 3 * 3, f"{calls} calls: the input gradient grows with the column blocks"


STRIDE_ONE = [  # (x shape, w shape, params): geometries whose input gradient is a convolution
    ((3, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 4, 8, 8), (6, 2, 3, 2), {"padding": 1, "groups": 2}),
    ((2, 2, 9, 9), (2, 2, 3, 3), {"dilation": 2, "padding": "same"}),
    ((1, 2, 5, 6), (2, 2, 2, 3), {"padding": "same"}),
    ((2, 2, 6, 7), (4, 2, 3, 2), {"padding": (2, 1), "dilation": (1, 2)}),
]


_DEFAULTS = (("padding", 0), ("dilation", 1), ("groups", 1))


def _input_grads(monkeypatch, x_shape, w_shape, params):
    """(as a convolution, by the kernel taps, whether the convolution was taken)."""
    x, w, _ = _inputs(x_shape, w_shape)
    out = conv_module._conv2d(x, w, None, **params)
    g = np.random.default_rng(5).standard_normal(out.shape)
    geo, groups = conv_module._conv_setup(
        "conv2d", x_shape, w_shape, 1, *(params.get(k, d) for k, d in _DEFAULTS)
    )
    taken = conv_module._full_correlation(g, w, geo, groups, x_shape) is not None
    fast = conv_module._conv2d_input_grad(g, w, x_shape=x_shape, **params)
    with monkeypatch.context() as m:
        m.setattr(conv_module, "_full_correlation", lambda *args: None)
        taps = conv_module._conv2d_input_grad(g, w, x_shape=x_shape, **params)
    return fast, taps, taken


@pytest.mark.parametrize(("x_shape", "w_shape", "params"), STRIDE_ONE)
def test_stride_one_input_gradient_as_a_convolution_equals_the_kernel_taps(
    monkeypatch, x_shape, w_shape, params
) -> None:
    fast, taps, taken = _input_grads(monkeypatch, x_shape, w_shape, params)
    assert taken
    assert fast.shape == x_shape and fast.flags.c_contiguous
    np.testing.assert_allclose(fast, taps, rtol=1e-12, atol=1e-12)


def test_padding_beyond_the_kernel_span_takes_the_kernel_taps(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    x_shape, w_shape, params = (2, 2, 6, 6), (3, 2, 3, 3), {"padding": 3}
    fast, taps, taken = _input_grads(monkeypatch, x_shape, w_shape, params)
    assert not taken
    np.testing.assert_array_equal(fast, taps)
    x, w, _ = _inputs(x_shape, w_shape)
    xt = torch.tensor(x, requires_grad=True)
    out = torch.nn.functional.conv2d(xt, torch.tensor(w), padding=3)
    (
        out * torch.tensor(np.random.default_rng(5).standard_normal(tuple(out.shape)))
    ).sum().backward()
    np.testing.assert_allclose(fast, xt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_weight_gradient_is_contiguous_and_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    for x_shape, w_shape, params in CASES:
        x, w, _ = _inputs(x_shape, w_shape)
        out = conv_module._conv2d(x, w, None, **params)
        g = np.random.default_rng(5).standard_normal(out.shape)
        gw = conv_module._conv2d_weight_grad(x, g, w_shape=w_shape, **params)
        assert gw.flags.c_contiguous
        wt = torch.tensor(w, requires_grad=True)
        (
            torch.nn.functional.conv2d(torch.tensor(x), wt, **params) * torch.tensor(g)
        ).sum().backward()
        np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-10, atol=1e-10)


LAYOUTS = [  # (x shape, w shape, params): geometries without groups
    ((3, 8, 9, 9), (4, 8, 3, 3), {}),
    ((2, 6, 11, 10), (5, 6, 3, 2), {"stride": 2, "padding": 1}),
    ((2, 12, 9, 9), (3, 12, 3, 3), {"dilation": 2, "padding": "same"}),
    ((2, 4, 7, 8), (3, 4, 2, 3), {"stride": (1, 2), "padding": (2, 1), "dilation": (2, 1)}),
]


@pytest.mark.parametrize(("x_shape", "w_shape", "params"), LAYOUTS)
def test_channels_last_rows_equal_channels_first_columns(
    monkeypatch, x_shape, w_shape, params
) -> None:
    geo, groups = conv_module._conv_setup(
        "conv2d", x_shape, w_shape, *(params.get(k, d) for k, d in (("stride", 1), *_DEFAULTS))
    )
    assert conv_module._channels_last(x_shape[1], groups, geo)
    x, w, b = _inputs(x_shape, w_shape)
    last = _run(x, w, b, params)
    monkeypatch.setattr(conv_module, "_channels_last", lambda *args: False)
    first = _run(x, w, b, params)
    for mine, theirs in zip(last, first, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)
    assert last[0].flags.c_contiguous and last[2].flags.c_contiguous


def test_the_layout_follows_the_longer_contiguous_run() -> None:
    def last(C, kw, W, **params):
        geo, groups = conv_module._conv_setup(
            "conv2d",
            (1, C, W, W),
            (2, C // params.get("groups", 1), kw, kw),
            1,
            0,
            1,
            params.get("groups", 1),
        )
        return conv_module._channels_last(C, groups, geo)

    assert last(32, 5, 24)  # kw * C = 160 values a run against Wo = 20
    assert not last(1, 5, 28)  # a grey image: 5 against 24
    assert not last(4, 3, 8, groups=2)  # groups keep the per-group columns
