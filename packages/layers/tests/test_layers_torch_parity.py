"""Forward values and gradients match torch.nn with the same weights (skipped without torch).

torch is a reference only: it is imported here, never in the package. Everything runs in float64
(tight tolerances) unless a test says otherwise; the class axis of sadl's losses is LAST, so
torch's (N, C, ...) layout is produced by moving the axis.
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl.testing import materialize
from sadl_layers import (
    GELU,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    BCEWithLogitsLoss,
    CausalSelfAttention,
    Conv2d,
    CrossEntropyLoss,
    Embedding,
    L1Loss,
    LayerNorm,
    LeakyReLU,
    Linear,
    MaxPool2d,
    MSELoss,
    MultiHeadAttention,
    NLLLoss,
    RMSNorm,
    Sequential,
    SiLU,
)
from sadl_layers.ops import INTERNAL_OPS, OPS

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
F = torch.nn.functional
pytestmark = pytest.mark.torch

RTOL, ATOL = 1e-7, 1e-9


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _copy_weights(layer, tlayer):
    """Load sadl's parameters into the torch module (float64), by name."""
    tlayer.double()
    state = {
        k: torch.from_numpy(np.array(v.numpy(), dtype=np.float64))
        for k, v in layer.state_dict().items()
    }
    own = tlayer.state_dict()
    for k, v in state.items():
        if own[k].dtype != v.dtype:
            state[k] = v.to(own[k].dtype)
    tlayer.load_state_dict(state)


def _run_pair(layer, tlayer, *inputs, weight_seed=7):
    """Forward both on float64 copies of ``inputs``; backward a fixed random projection; compare
    outputs, input gradients and parameter gradients."""
    layer.to(dtype=np.float64)
    _copy_weights(layer, tlayer)
    xs = [sadl.Tensor(a.copy(), requires_grad=True) if a.dtype.kind == "f" else a for a in inputs]
    txs = [
        torch.from_numpy(a.copy()).requires_grad_() if a.dtype.kind == "f" else torch.from_numpy(a)
        for a in inputs
    ]
    out, tout = layer(*xs), tlayer(*txs)
    if isinstance(tout, tuple):
        tout = tout[0]
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=RTOL, atol=ATOL)
    w = np.random.default_rng(weight_seed).uniform(0.5, 1.5, size=out.shape)
    (out * w).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for x, tx in zip(xs, txs):
        if isinstance(x, sadl.Tensor):
            np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    tparams = dict(tlayer.named_parameters())
    for name, p in layer.named_parameters():
        np.testing.assert_allclose(
            p.grad, tparams[name].grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=name
        )
    return out


# ------------------------------------------------------------------------------ layers


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
    _run_pair(Linear(5, 3, bias=bias, rng=0), torch.nn.Linear(5, 3, bias=bias), _rand(2, 4, 5))


def test_embedding_with_repeated_ids():
    ids = np.array([[1, 3, 1], [0, 1, 4]])
    _run_pair(Embedding(5, 3, rng=0), torch.nn.Embedding(5, 3), ids)


def test_embedding_padding_idx():
    ids = np.array([[1, 3, 1], [0, 1, 4]])
    _run_pair(Embedding(5, 3, padding_idx=1, rng=0), torch.nn.Embedding(5, 3, padding_idx=1), ids)


@pytest.mark.parametrize("shape", [4, (3, 4)])
def test_layer_norm(shape):
    layer, tlayer = LayerNorm(shape), torch.nn.LayerNorm(shape)
    layer.weight.data[...] = _rand(*np.atleast_1d(shape), seed=1)
    layer.bias.data[...] = _rand(*np.atleast_1d(shape), seed=2)
    _run_pair(layer, tlayer, _rand(2, 3, 4))


def test_layer_norm_without_bias_and_affine():
    _run_pair(LayerNorm(4, bias=False), torch.nn.LayerNorm(4, bias=False), _rand(3, 4))
    _run_pair(
        LayerNorm(4, elementwise_affine=False),
        torch.nn.LayerNorm(4, elementwise_affine=False),
        _rand(3, 4),
    )


def test_rms_norm():
    layer = RMSNorm(4, eps=1e-6)
    layer.weight.data[...] = _rand(4, seed=1)
    _run_pair(layer, torch.nn.RMSNorm(4, eps=1e-6), _rand(2, 3, 4))
    _run_pair(RMSNorm(4), torch.nn.RMSNorm(4), _rand(2, 3, 4))  # eps=None: dtype's eps


@pytest.mark.parametrize(
    "cls, tcls, shape",
    [
        (BatchNorm1d, torch.nn.BatchNorm1d, (6, 3)),
        (BatchNorm1d, torch.nn.BatchNorm1d, (4, 3, 5)),
        (BatchNorm2d, torch.nn.BatchNorm2d, (2, 3, 4, 5)),
    ],
)
def test_batch_norm_train_then_eval(cls, tcls, shape):
    layer, tlayer = cls(3, momentum=0.3), tcls(3, momentum=0.3)
    layer.weight.data[...] = _rand(3, seed=1)
    layer.bias.data[...] = _rand(3, seed=2)
    for step in range(3):  # training steps: batch statistics, running stats updated
        _run_pair(layer, tlayer, _rand(*shape, seed=10 + step) * 2 + 1)
        layer.zero_grad()
        tlayer.zero_grad()
    np.testing.assert_allclose(layer.running_mean.data, tlayer.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(layer.running_var.data, tlayer.running_var.numpy(), rtol=1e-12)
    assert int(layer.num_batches_tracked.data) == int(tlayer.num_batches_tracked)
    layer.eval()
    tlayer.eval()
    _run_pair(layer, tlayer, _rand(*shape, seed=20))


def test_batch_norm_momentum_none_and_no_tracking():
    for kwargs in ({"momentum": None}, {"track_running_stats": False}, {"affine": False}):
        layer, tlayer = BatchNorm1d(2, **kwargs), torch.nn.BatchNorm1d(2, **kwargs)
        for step in range(2):
            _run_pair(layer, tlayer, _rand(5, 2, seed=step))
        if layer.track_running_stats:
            np.testing.assert_allclose(layer.running_var.data, tlayer.running_var.numpy())


@pytest.mark.parametrize(
    "args, kwargs, shape",
    [
        ((3, 4, 3), {}, (2, 3, 6, 6)),
        ((3, 4, 3), {"padding": 1}, (2, 3, 5, 5)),
        ((2, 4, (3, 2)), {"stride": 2, "padding": (1, 0)}, (1, 2, 7, 6)),
        ((2, 2, 3), {"dilation": 2, "padding": 2}, (1, 2, 7, 7)),
        ((4, 6, 3), {"groups": 2, "stride": (2, 1), "padding": 1}, (2, 4, 5, 6)),
        ((4, 4, 3), {"groups": 4, "bias": False}, (1, 4, 5, 5)),
    ],
)
def test_conv2d(args, kwargs, shape):
    _run_pair(Conv2d(*args, rng=0, **kwargs), torch.nn.Conv2d(*args, **kwargs), _rand(*shape))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3), "stride": 1},
        {"kernel_size": 2, "stride": 1, "dilation": 2},
    ],
)
def test_max_pool2d(kwargs):
    _run_pair(MaxPool2d(**kwargs), torch.nn.MaxPool2d(**kwargs), _rand(2, 3, 7, 6))


def test_max_pool2d_ties_route_to_the_first_maximum_like_torch():
    x = np.zeros((1, 2, 4, 4))  # after a ReLU whole windows are exactly 0: four-way ties
    x[0, 1, 1, 1] = 1.0
    x[0, 1, 2:, 2:] = 3.0
    _run_pair(MaxPool2d(2), torch.nn.MaxPool2d(2), x)
    _run_pair(MaxPool2d(3, stride=1, padding=1), torch.nn.MaxPool2d(3, stride=1, padding=1), x)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": (3, 2), "stride": 1},
    ],
)
def test_avg_pool2d(kwargs):
    _run_pair(AvgPool2d(**kwargs), torch.nn.AvgPool2d(**kwargs), _rand(2, 3, 7, 6))


@pytest.mark.parametrize(
    "layer, tlayer",
    [
        (GELU(), torch.nn.GELU()),
        (GELU("tanh"), torch.nn.GELU("tanh")),
        (SiLU(), torch.nn.SiLU()),
        (LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
    ],
    ids=["gelu", "gelu-tanh", "silu", "leaky_relu"],
)
def test_activations(layer, tlayer):
    _run_pair(layer, tlayer, _rand(3, 50) * 3)


def test_gelu_float32_matches_torch():
    x = np.linspace(-10, 10, 2001).astype(np.float32)
    for approximate in ("none", "tanh"):
        got = sadl.ops.gelu(x, approximate=approximate)
        want = F.gelu(torch.from_numpy(x), approximate=approximate).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def test_sequential_mlp():
    _run_pair(
        Sequential(Linear(4, 8, rng=0), GELU(), LayerNorm(8), Linear(8, 2, rng=1)),
        torch.nn.Sequential(
            torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2)
        ),
        _rand(3, 4),
    )


# --------------------------------------------------------------------------- attention


def _torch_causal(tq, tk):
    return torch.ones(tq, tk, dtype=torch.bool).tril(diagonal=tk - tq)


@pytest.mark.parametrize("tq, tk", [(5, 5), (3, 7), (1, 6)])
def test_sdpa_causal_matches_torch(tq, tk):
    q, k, v = _rand(2, 3, tq, 4, seed=1), _rand(2, 3, tk, 4, seed=2), _rand(2, 3, tk, 5, seed=3)
    mask = _torch_causal(tq, tk)
    layer = lambda q, k, v: sadl.ops.scaled_dot_product_attention(q, k, v, causal=True)
    tlayer = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    _run_fn_pair(layer, tlayer, q, k, v)


def test_sdpa_masks_and_scale_match_torch():
    q, k, v = _rand(2, 4, 3, seed=1), _rand(2, 6, 3, seed=2), _rand(2, 6, 2, seed=3)
    keep = np.random.default_rng(4).random((4, 6)) > 0.4
    keep[:, 0] = True
    additive = _rand(4, 6, seed=5)
    _run_fn_pair(
        lambda q, k, v: sadl.ops.scaled_dot_product_attention(q, k, v, mask=keep, scale=0.7),
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.from_numpy(keep), scale=0.7
        ),
        q,
        k,
        v,
    )
    _run_fn_pair(
        lambda q, k, v: sadl.ops.scaled_dot_product_attention(q, k, v, mask=additive),
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.from_numpy(additive)
        ),
        q,
        k,
        v,
    )


def _run_fn_pair(fn, tfn, *arrays):
    xs = [sadl.Tensor(a.copy(), requires_grad=True) for a in arrays]
    txs = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
    out, tout = fn(*xs), tfn(*txs)
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=RTOL, atol=ATOL)
    w = np.random.default_rng(9).uniform(0.5, 1.5, size=out.shape)
    (out * w).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for x, tx in zip(xs, txs):
        np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=RTOL, atol=ATOL)


class _TorchCausalSelfAttention(torch.nn.Module):
    """nanoGPT's CausalSelfAttention (flash path), the reference for ours."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = torch.nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = torch.nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def test_causal_self_attention_matches_nanogpt():
    _run_pair(CausalSelfAttention(8, 2, rng=0), _TorchCausalSelfAttention(8, 2), _rand(2, 5, 8))


def test_multihead_attention_matches_torch():
    layer = MultiHeadAttention(6, 3, rng=0)
    layer.in_proj_bias.data[...] = _rand(18, seed=3)
    tlayer = torch.nn.MultiheadAttention(6, 3, batch_first=True)
    x = _rand(2, 4, 6)
    layer.to(dtype=np.float64)
    _copy_weights(layer, tlayer)
    causal_block = ~_torch_causal(4, 4)  # torch.nn.MultiheadAttention: True = NOT allowed
    for causal in (False, True):
        xs = sadl.Tensor(x.copy(), requires_grad=True)
        tx = torch.from_numpy(x.copy()).requires_grad_()
        out = layer(xs, causal=causal)
        tout = tlayer(tx, tx, tx, need_weights=False, attn_mask=causal_block if causal else None)[0]
        np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=RTOL, atol=ATOL)
        out.sum().backward()
        tout.sum().backward()
        np.testing.assert_allclose(xs.grad, tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    tparams = dict(tlayer.named_parameters())
    for name, p in layer.named_parameters():
        np.testing.assert_allclose(
            p.grad, tparams[name].grad.numpy(), rtol=1e-6, atol=1e-12, err_msg=name
        )
    # cross-attention: query from one sequence, keys/values from another
    q, kv = _rand(2, 3, 6, seed=5), _rand(2, 5, 6, seed=6)
    out = layer(q, kv, kv).data
    tout = tlayer(
        torch.from_numpy(q), torch.from_numpy(kv), torch.from_numpy(kv), need_weights=False
    )[0]
    np.testing.assert_allclose(out, tout.detach().numpy(), rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------ losses


def _class_second(logits):
    """sadl's (..., C) logits as torch's (N, C, ...) layout."""
    return np.moveaxis(logits, -1, 1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"ignore_index": 2},
        {"label_smoothing": 0.15},
        {"ignore_index": 0, "label_smoothing": 0.3},
    ],
)
def test_cross_entropy(reduction, kwargs):
    logits = _rand(2, 3, 5)
    targets = np.array([[0, 2, 4], [2, 1, 0]])
    loss_fn = CrossEntropyLoss(reduction=reduction, **kwargs)
    tloss_fn = torch.nn.CrossEntropyLoss(reduction=reduction, **kwargs)
    _run_fn_pair(
        lambda z: loss_fn(z, targets),
        lambda z: tloss_fn(z.movedim(-1, 1), torch.from_numpy(targets)),
        logits,
    )


def test_cross_entropy_extreme_logits_float32():
    logits = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 999.0, 1000.0]], dtype=np.float32)
    targets = np.array([1, 0])
    z = sadl.Tensor(logits, requires_grad=True)
    tz = torch.from_numpy(logits).requires_grad_()
    loss = sadl.ops.cross_entropy(z, targets, label_smoothing=0.1)
    tloss = F.cross_entropy(tz, torch.from_numpy(targets), label_smoothing=0.1)
    np.testing.assert_allclose(loss.data, tloss.detach().numpy(), rtol=1e-6)
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(z.grad, tz.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    logp = _rand(4, 5)
    targets = np.array([1, -100, 4, 0])
    loss_fn = NLLLoss(reduction=reduction)
    tloss_fn = torch.nn.NLLLoss(reduction=reduction)
    _run_fn_pair(
        lambda z: loss_fn(z, targets), lambda z: tloss_fn(z, torch.from_numpy(targets)), logp
    )
    logp3 = _rand(2, 3, 4)
    t3 = np.array([[0, 1, 3], [2, 2, 1]])
    _run_fn_pair(
        lambda z: loss_fn(z, t3),
        lambda z: tloss_fn(z.movedim(-1, 1), torch.from_numpy(t3)),
        logp3,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "cls, tcls", [(MSELoss, torch.nn.MSELoss), (L1Loss, torch.nn.L1Loss)], ids=["mse", "l1"]
)
def test_regression_losses(cls, tcls, reduction):
    _run_fn_pair(
        lambda a, b: cls(reduction=reduction)(a, b),
        lambda a, b: tcls(reduction=reduction)(a, b),
        _rand(3, 4),
        _rand(3, 4, seed=1),
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("pos_weight", [None, np.array([0.5, 2.0, 3.0])])
def test_bce_with_logits(reduction, pos_weight):
    logits = _rand(4, 3) * 5
    logits[0] = [1000.0, -1000.0, 30.0]
    targets = np.random.default_rng(2).uniform(0, 1, (4, 3))
    tpw = None if pos_weight is None else torch.from_numpy(pos_weight)
    _run_fn_pair(
        lambda z, y: BCEWithLogitsLoss(reduction=reduction, pos_weight=pos_weight)(z, y),
        lambda z, y: torch.nn.BCEWithLogitsLoss(reduction=reduction, pos_weight=tpw)(z, y),
        logits,
        targets,
    )


# ------------------------------------------------------------------ singular points
def _norm_reference(f):
    return lambda x, w=None, b=None, eps=1e-5, **_: f(x, w, b, eps)


SINGULAR_REFERENCE = {
    "l1_loss": lambda a, b: F.l1_loss(a, b),
    "leaky_relu": lambda x, negative_slope: F.leaky_relu(x, negative_slope),
    "max_pool2d": lambda x, kernel_size: F.max_pool2d(x, kernel_size),
    "layer_norm": _norm_reference(lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)),
    "rms_norm": lambda x, w=None, eps=None: F.rms_norm(x, x.shape[-1:], w, eps),
}
# The ops that came from core (arctan2, hypot, prod, std, cumprod, clip) have their own test,
# with hypot's torch NaN: test_moved_singular_points_torch.py.
FROM_CORE = {"arctan2", "hypot", "prod", "std", "cumprod", "clip"}
SINGULAR = [
    (op, i)
    for op in OPS + INTERNAL_OPS
    if op.name not in FROM_CORE
    for i in range(len(op.singular_points))
]


def test_every_layers_op_with_singular_points_has_a_torch_reference():
    assert {op.name for op, _ in SINGULAR} == set(SINGULAR_REFERENCE)


@pytest.mark.parametrize(("op", "index"), SINGULAR, ids=[f"{o.name}-{i}" for o, i in SINGULAR])
def test_gradient_at_a_singular_point_matches_torch(op, index):
    inputs, params = materialize(op.singular_points[index], np.random.default_rng(0))
    ours = [sadl.Tensor(x, requires_grad=True) if isinstance(x, np.ndarray) else x for x in inputs]
    theirs = [
        torch.tensor(x, requires_grad=True) if isinstance(x, np.ndarray) else x for x in inputs
    ]
    out = op(*ours, **params)
    ref = SINGULAR_REFERENCE[op.name](*theirs, **params)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, size=out.shape)
    (out * weights).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    for mine, reference in zip(ours, theirs):
        if isinstance(mine, sadl.Tensor):
            assert np.isfinite(mine.grad).all()
            np.testing.assert_allclose(mine.grad, reference.grad.numpy(), rtol=RTOL, atol=1e-7)


@pytest.mark.parametrize(
    "name",
    [f"{kind}{d}d" for kind in ("Conv", "ConvTranspose", "MaxPool", "AvgPool") for d in (1, 2, 3)],
)
def test_conv_and_pool_layers_take_torchs_arguments_in_torchs_order(name):
    import inspect

    import sadl_layers

    def positional(cls):
        params = inspect.signature(cls).parameters.values()
        return [(p.name, p.default) for p in params if p.kind is not p.KEYWORD_ONLY]

    ours, theirs = positional(getattr(sadl_layers, name)), positional(getattr(torch.nn, name))
    assert ours == theirs[: len(ours)]
    # what torch has beyond ours: padding_mode (zeros only here), device and dtype (keywords here)
    assert {n for n, _ in theirs[len(ours) :]} <= {"padding_mode", "device", "dtype"}
