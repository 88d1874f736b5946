"""The ops and layers PyTorch users reach for match torch.nn.functional: forward values, first
derivatives and second derivatives (float64; skipped without torch).

Each case runs the same function in sadl and torch, then compares the output, the gradient of
``sum(out * w)`` for every float input, and the gradient of ``sum(grads * v)`` (a second
derivative through ``create_graph=True``).
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import (
    CELU,
    ELU,
    SELU,
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    ConvTranspose1d,
    ConvTranspose2d,
    CrossEntropyLoss,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LogSigmoid,
    MaxPool1d,
    MaxPool2d,
    Mish,
    NLLLoss,
    ReLU6,
    Softplus,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
F = torch.nn.functional
pytestmark = pytest.mark.torch

RTOL, ATOL = 1e-7, 1e-9


def _rand(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def parity(fn, tfn, *arrays, second=True, rtol=RTOL, atol=ATOL):
    """Compare fn and tfn on float64 copies of ``arrays``: output, first and second derivatives.

    Integer arrays are passed as constants. ``fn`` may return a tuple (values, indices): the
    first element carries the gradient, the rest are compared as they are.
    """
    xs = [sadl.Tensor(a.copy(), requires_grad=True) if a.dtype.kind == "f" else a for a in arrays]
    txs = [
        torch.from_numpy(a.copy()).requires_grad_() if a.dtype.kind == "f" else torch.from_numpy(a)
        for a in arrays
    ]
    out, tout = fn(*xs), tfn(*txs)
    if isinstance(out, tuple):
        for extra, textra in zip(out[1:], tout[1:]):
            np.testing.assert_array_equal(np.asarray(extra.data), textra.numpy())
        out, tout = out[0], tout[0]
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=rtol, atol=atol)
    diff = [x for x in xs if isinstance(x, sadl.Tensor)]
    tdiff = [x for x in txs if x.dtype.is_floating_point]
    w = np.random.default_rng(11).uniform(0.5, 1.5, size=out.shape)
    grads = sadl.grad((out * w).sum(), diff, create_graph=second, allow_unused=True)
    tgrads = torch.autograd.grad(
        (tout * torch.from_numpy(w)).sum(), tdiff, create_graph=second, allow_unused=True
    )
    for k, (g, tg) in enumerate(zip(grads, tgrads)):
        want = np.zeros(diff[k].shape) if tg is None else tg.detach().numpy()
        got = np.zeros(diff[k].shape) if g is None else np.asarray(g.data)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"grad {k}")
    if not second:
        return
    pairs = [(g, tg) for g, tg in zip(grads, tgrads) if g is not None and tg is not None]
    pairs = [(g, tg) for g, tg in pairs if g.requires_grad and tg.requires_grad]
    if not pairs:
        return
    vs = [
        np.random.default_rng(20 + k).uniform(0.5, 1.5, size=g.shape)
        for k, (g, _) in enumerate(pairs)
    ]
    s = sum((g * v).sum() for (g, _), v in zip(pairs, vs))
    ts = sum((tg * torch.from_numpy(v)).sum() for (_, tg), v in zip(pairs, vs))
    second_grads = sadl.grad(s, diff, allow_unused=True)
    tsecond = torch.autograd.grad(ts, tdiff, allow_unused=True)
    for k, (g, tg) in enumerate(zip(second_grads, tsecond)):
        want = np.zeros(diff[k].shape) if tg is None else tg.numpy()
        got = np.zeros(diff[k].shape) if g is None else np.asarray(g.data)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"second grad {k}")


# ----------------------------------------------------------------------------- activations

#: Values on both sides of every kink the activations have (ties follow torch's kernels).
EDGES = np.array(
    [
        -1000.0,
        -20.0,
        -4.0,
        -3.0,
        -2.5,
        -1.0,
        -0.5,
        0.0,
        0.5,
        1.0,
        2.5,
        3.0,
        4.0,
        6.0,
        7.0,
        25.0,
        1000.0,
    ]
)


@pytest.mark.parametrize(
    "layer, tlayer, tol",
    [
        (ELU(), torch.nn.ELU(), RTOL),
        (ELU(0.3), torch.nn.ELU(0.3), RTOL),
        (SELU(), torch.nn.SELU(), RTOL),
        (CELU(), torch.nn.CELU(), RTOL),
        # torch's CELU backward rounds 1/alpha to float32 (derivatives.yaml: alpha.toFloat())
        (CELU(1.7), torch.nn.CELU(1.7), 1e-7),
        (Mish(), torch.nn.Mish(), RTOL),
        (Softplus(), torch.nn.Softplus(), RTOL),
        (Softplus(beta=2.0, threshold=3.0), torch.nn.Softplus(beta=2.0, threshold=3.0), RTOL),
        (LogSigmoid(), torch.nn.LogSigmoid(), RTOL),
        (Hardtanh(), torch.nn.Hardtanh(), RTOL),
        (Hardtanh(-0.5, 2.5), torch.nn.Hardtanh(-0.5, 2.5), RTOL),
        (ReLU6(), torch.nn.ReLU6(), RTOL),
        # torch multiplies by the float32 constant 1/6 in hardsigmoid's backward
        (Hardsigmoid(), torch.nn.Hardsigmoid(), 1e-8),
        (Hardswish(), torch.nn.Hardswish(), RTOL),
    ],
    ids=lambda v: repr(v) if not isinstance(v, float) else "",
)
def test_activation_layers(layer, tlayer, tol):
    parity(layer, tlayer, _rand(4, 30, scale=3.0), rtol=tol, atol=tol)
    # torch's Mish has a NaN second derivative at x = 1000 (see the test below)
    edges = EDGES[:-1].copy() if isinstance(layer, Mish) else EDGES.copy()
    parity(layer, tlayer, edges, rtol=tol, atol=tol)


def test_mish_second_derivative_stays_finite_for_large_inputs():
    x = sadl.Tensor(np.array([30.0, 1000.0]), requires_grad=True)
    (g,) = sadl.grad(sadl.ops.mish(x).sum(), [x], create_graph=True)
    (h,) = sadl.grad(g.sum(), [x])
    np.testing.assert_allclose(h.data, 0.0, atol=1e-12)  # torch gives NaN at 1000


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_first_and_second_derivatives(approximate):
    parity(
        lambda x: sadl.ops.gelu(x, approximate=approximate),
        lambda x: F.gelu(x, approximate=approximate),
        np.concatenate([_rand(60, scale=3.0), EDGES[2:-2]]),
    )


def test_activation_ops_take_torch_arguments():
    x = _rand(3, 7, scale=3.0)
    parity(lambda t: sadl.ops.elu(t, alpha=0.5), lambda t: F.elu(t, alpha=0.5), x)
    parity(lambda t: sadl.ops.celu(t, alpha=2.0), lambda t: F.celu(t, alpha=2.0), x, rtol=1e-7)
    parity(
        lambda t: sadl.ops.softplus_beta(t, beta=0.5, threshold=1.0),
        lambda t: F.softplus(t, beta=0.5, threshold=1.0),
        x,
    )
    parity(
        lambda t: sadl.ops.hardtanh(t, min_val=-2.0, max_val=0.5),
        lambda t: F.hardtanh(t, min_val=-2.0, max_val=0.5),
        x,
    )


# -------------------------------------------------------------------------- convolution


@pytest.mark.parametrize(
    "args, kwargs, shape",
    [
        ((3, 2, 3), {}, (2, 3, 4, 5)),
        ((2, 3, (3, 2)), {"stride": 2, "padding": 1, "output_padding": 1}, (1, 2, 3, 4)),
        ((4, 2, 2), {"groups": 2, "stride": (2, 1), "dilation": (1, 2)}, (2, 4, 3, 3)),
        ((2, 2, 2), {"dilation": 3, "output_padding": 2, "bias": False}, (1, 2, 2, 3)),
    ],
)
def test_conv_transpose2d(args, kwargs, shape):
    layer = ConvTranspose2d(*args, rng=0, dtype=np.float64, **kwargs)
    tlayer = torch.nn.ConvTranspose2d(*args, **kwargs).double()
    tlayer.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in layer.state_dict().items()})
    weights = [p.data for _, p in layer.named_parameters()]
    tweights = [p.detach().numpy() for _, p in tlayer.named_parameters()]
    for a, b in zip(weights, tweights):
        np.testing.assert_array_equal(a, b)
    params = {k: v for k, v in kwargs.items() if k != "bias"}
    bias = layer.bias.data if layer.bias is not None else None
    parity(
        lambda x, w: sadl.ops.conv_transpose2d(x, w, bias, **params),
        lambda x, w: F.conv_transpose2d(
            x, w, None if bias is None else torch.from_numpy(bias), **params
        ),
        _rand(*shape),
        layer.weight.data.copy(),
    )


def test_conv_transpose2d_output_size_picks_the_padding():
    layer = ConvTranspose2d(2, 3, 3, stride=2, padding=1, rng=0, dtype=np.float64)
    tlayer = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1).double()
    tlayer.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in layer.state_dict().items()})
    x = _rand(1, 2, 4, 5)
    for size in [(7, 9), (8, 10), (8, 9)]:
        out = layer(x, output_size=size)
        tout = tlayer(torch.from_numpy(x), output_size=size)
        np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"stride": 2, "padding": 2, "dilation": 2}, {"groups": 2, "bias": False}],
)
def test_conv1d(kwargs):
    layer = Conv1d(4, 6, 3, rng=0, dtype=np.float64, **kwargs)
    tlayer = torch.nn.Conv1d(4, 6, 3, **kwargs).double()
    tlayer.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in layer.state_dict().items()})
    params = {k: v for k, v in kwargs.items() if k != "bias"}
    b = layer.bias
    parity(
        lambda x, w: sadl.ops.conv1d(x, w, None if b is None else b.data, **params),
        lambda x, w: F.conv1d(x, w, None if b is None else torch.from_numpy(b.data), **params),
        _rand(2, 4, 9),
        layer.weight.data.copy(),
    )
    parity(layer, tlayer, _rand(4, 9), second=False)  # unbatched (C, L)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"stride": 3, "padding": 1, "output_padding": 2}, {"groups": 2, "dilation": 2}],
)
def test_conv_transpose1d(kwargs):
    layer = ConvTranspose1d(4, 2, 3, rng=0, dtype=np.float64, **kwargs)
    tlayer = torch.nn.ConvTranspose1d(4, 2, 3, **kwargs).double()
    tlayer.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in layer.state_dict().items()})
    b = torch.from_numpy(layer.bias.data)
    parity(
        lambda x, w: sadl.ops.conv_transpose1d(x, w, layer.bias.data, **kwargs),
        lambda x, w: F.conv_transpose1d(x, w, b, **kwargs),
        _rand(2, 4, 5),
        layer.weight.data.copy(),
    )


# ------------------------------------------------------------------------------ pooling


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2, "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel_size": 2, "stride": 3, "ceil_mode": True},
        {"kernel_size": (2, 3), "stride": 1, "dilation": 2},
    ],
)
def test_max_pool2d_ceil_mode_and_indices(kwargs):
    x = _rand(2, 3, 7, 6)
    parity(MaxPool2d(**kwargs), torch.nn.MaxPool2d(**kwargs), x)
    parity(
        MaxPool2d(return_indices=True, **kwargs),
        torch.nn.MaxPool2d(return_indices=True, **kwargs),
        x,
    )


def test_max_pool_indices_on_ties_pick_the_first_maximum_like_torch():
    x = np.zeros((1, 1, 4, 5))
    x[0, 0, 1:3, 2:4] = 2.0
    parity(
        lambda t: sadl.ops.max_pool2d(t, kernel_size=3, stride=1, padding=1, return_indices=True),
        lambda t: F.max_pool2d(t, 3, stride=1, padding=1, return_indices=True),
        x,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2, "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {
            "kernel_size": 3,
            "stride": 2,
            "padding": 1,
            "ceil_mode": True,
            "count_include_pad": False,
        },
        {"kernel_size": 3, "padding": 1, "divisor_override": 5},
    ],
)
def test_avg_pool2d_options(kwargs):
    parity(AvgPool2d(**kwargs), torch.nn.AvgPool2d(**kwargs), _rand(2, 3, 7, 6))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel_size": 3, "dilation": 2, "return_indices": True},
    ],
)
def test_max_pool1d(kwargs):
    parity(MaxPool1d(**kwargs), torch.nn.MaxPool1d(**kwargs), _rand(2, 3, 11))
    parity(MaxPool1d(**kwargs), torch.nn.MaxPool1d(**kwargs), _rand(3, 11))  # unbatched


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {
            "kernel_size": 4,
            "stride": 3,
            "padding": 2,
            "ceil_mode": True,
            "count_include_pad": False,
        },
    ],
)
def test_avg_pool1d(kwargs):
    parity(AvgPool1d(**kwargs), torch.nn.AvgPool1d(**kwargs), _rand(2, 3, 11))


@pytest.mark.parametrize("size", [1, (2, 3), (3, None), (5, 4)])
def test_adaptive_avg_pool2d(size):
    parity(AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), _rand(2, 3, 5, 7))


def test_adaptive_avg_pool1d():
    parity(AdaptiveAvgPool1d(3), torch.nn.AdaptiveAvgPool1d(3), _rand(2, 3, 7))
    parity(AdaptiveAvgPool1d(9), torch.nn.AdaptiveAvgPool1d(9), _rand(3, 7))


# ---------------------------------------------------------------------------- resizing


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale_factor": 2},
        {"size": (5, 4)},
        {"scale_factor": 1.7},
        {"scale_factor": (0.6, 2.5)},
        {"size": (11, 3), "mode": "nearest-exact"},
        {"scale_factor": 2, "mode": "bilinear"},
        {"scale_factor": 2, "mode": "bilinear", "align_corners": True},
        {"size": (13, 5), "mode": "bilinear", "align_corners": True},
        {"scale_factor": (1.3, 0.6), "mode": "bilinear"},
        {"scale_factor": 1.5, "mode": "bilinear", "recompute_scale_factor": True},
        {"size": (3, 4), "mode": "area"},
    ],
)
def test_interpolate_2d(kwargs):
    parity(Upsample(**kwargs), torch.nn.Upsample(**kwargs), _rand(2, 3, 7, 6))


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({"scale_factor": 2.3, "mode": "linear"}, (2, 3, 11)),
        ({"size": 4, "mode": "linear", "align_corners": True}, (2, 3, 11)),
        ({"scale_factor": 3}, (2, 3, 5)),
        ({"size": (4, 3, 7), "mode": "trilinear", "align_corners": True}, (1, 2, 3, 4, 5)),
        ({"scale_factor": (2, 1, 0.5), "mode": "trilinear"}, (1, 2, 3, 4, 5)),
        ({"size": (2, 5, 3)}, (1, 2, 3, 4, 5)),
    ],
)
def test_interpolate_1d_and_3d(kwargs, shape):
    parity(
        lambda x: sadl.ops.interpolate(x, **kwargs),
        lambda x: F.interpolate(x, **kwargs),
        _rand(*shape),
    )


def test_upsampling_layers():
    x = _rand(1, 2, 3, 4)
    parity(UpsamplingNearest2d(scale_factor=2), torch.nn.UpsamplingNearest2d(scale_factor=2), x)
    parity(UpsamplingBilinear2d(size=(5, 7)), torch.nn.UpsamplingBilinear2d(size=(5, 7)), x)


def test_interpolate_float32_matches_torch():
    x = _rand(2, 3, 9, 7).astype(np.float32)
    for kwargs in ({"scale_factor": 1.7}, {"size": (4, 13), "mode": "bilinear"}):
        got = sadl.ops.interpolate(x, **kwargs)
        assert got.dtype == np.float32
        want = F.interpolate(torch.from_numpy(x), **kwargs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------- losses

WEIGHT = np.array([0.5, 2.0, 1.5, 1.0])


def _class_second(a):
    """sadl's (..., C) layout as torch's (N, C, ...)."""
    return a.movedim(-1, 1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"weight": WEIGHT},
        {"weight": WEIGHT, "ignore_index": 2},
        {"weight": WEIGHT, "label_smoothing": 0.2},
        {"weight": WEIGHT, "ignore_index": 0, "label_smoothing": 0.3},
    ],
)
def test_cross_entropy_with_class_weights(reduction, kwargs):
    targets = np.array([[0, 2, 3], [2, 1, 0]])
    tkwargs = {**kwargs, "weight": torch.from_numpy(kwargs["weight"])}
    parity(
        lambda z: CrossEntropyLoss(reduction=reduction, **kwargs)(z, targets),
        lambda z: F.cross_entropy(
            _class_second(z), torch.from_numpy(targets), reduction=reduction, **tkwargs
        ),
        _rand(2, 3, 4),
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"weight": WEIGHT}, {"label_smoothing": 0.25}, {"weight": WEIGHT, "label_smoothing": 0.1}],
)
def test_cross_entropy_with_class_probabilities(reduction, kwargs):
    probs = np.random.default_rng(3).dirichlet(np.ones(4), size=(2, 3))
    tkwargs = dict(kwargs)
    if "weight" in kwargs:
        tkwargs["weight"] = torch.from_numpy(kwargs["weight"])
    # both the logits and the target probabilities are differentiated
    parity(
        lambda z, p: sadl.ops.cross_entropy(z, p, reduction=reduction, **kwargs),
        lambda z, p: F.cross_entropy(
            _class_second(z), _class_second(p), reduction=reduction, **tkwargs
        ),
        _rand(2, 3, 4),
        probs,
    )


def test_cross_entropy_probabilities_for_extreme_logits_float32():
    logits = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 999.0, 1000.0]], dtype=np.float32)
    probs = np.array([[0.7, 0.1, 0.2], [0.0, 0.5, 0.5]], dtype=np.float32)
    loss = sadl.ops.cross_entropy(logits, probs, label_smoothing=0.1)
    tloss = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(probs), label_smoothing=0.1)
    assert loss.dtype == np.float32
    np.testing.assert_allclose(loss, tloss.numpy(), rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_with_class_weights(reduction):
    targets = np.array([1, -100, 3, 0, 3])
    parity(
        lambda z: NLLLoss(weight=WEIGHT, reduction=reduction)(z, targets),
        lambda z: F.nll_loss(
            z, torch.from_numpy(targets), weight=torch.from_numpy(WEIGHT), reduction=reduction
        ),
        _rand(5, 4),
    )
    t3 = np.array([[0, 1, 3], [2, 2, 1]])
    parity(
        lambda z: sadl.ops.nll_loss(z, t3, weight=WEIGHT, reduction=reduction),
        lambda z: F.nll_loss(
            _class_second(z),
            torch.from_numpy(t3),
            weight=torch.from_numpy(WEIGHT),
            reduction=reduction,
        ),
        _rand(2, 3, 4),
    )
