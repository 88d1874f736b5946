"""Every op of sadl-layers passes core's conformance battery, and its gradient is the same on
arrays and on Tensors (create_graph=True)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sadl
import sadl_layers
from sadl.plugins import UnknownNameError, reload_plugins
from sadl.testing import check_op
from sadl_layers.ops import INTERNAL_OPS, OPS
from sadl_layers.ops.activations import normal_cdf

ALL_OPS = OPS + INTERNAL_OPS


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: op.name)
def test_check_op(op):
    """forward, gradcheck, gradgradcheck, float32 in/out, no_grad, over every example."""
    assert len(op.examples) >= 1
    report = check_op(op)
    assert report.ok, str(report)
    assert op.double_backward, f"{op.name} declares no double backward"


def _inputs(example, rng):
    """The example's inputs: a shape becomes random float64 values from its domain."""
    return [
        rng.uniform(*example.domain, size=x)
        if isinstance(x, tuple) and all(isinstance(n, int) for n in x)
        else x
        for x in example.inputs
    ]


@pytest.mark.parametrize("op", [op for op in ALL_OPS if op.differentiable], ids=lambda op: op.name)
def test_create_graph_gradient_equals_array_gradient(op):
    """The rule gives the same first-order gradient on Tensors (create_graph=True, where a
    backward op is recorded and packed gradients are sliced on the graph) as on arrays."""
    rng = np.random.default_rng(1)
    for example in op.examples:
        inputs, params = _inputs(example, rng), example.params
        results = []
        for create_graph in (False, True):
            xs = [
                sadl.Tensor(x.copy(), requires_grad=True)
                if isinstance(x, np.ndarray) and x.dtype.kind == "f"
                else x
                for x in inputs
            ]
            out = op(*xs, **params)
            if isinstance(out, tuple):  # (values, indices): the values carry the gradient
                out = out[0]
            w = np.random.default_rng(2).uniform(0.5, 1.5, size=out.shape)
            diff = [x for x in xs if isinstance(x, sadl.Tensor)]
            gs = sadl.grad((out * w).sum(), diff, create_graph=create_graph, allow_unused=True)
            results.append([None if g is None else np.asarray(g.data) for g in gs])
        for fast, graph in zip(*results):
            if fast is None or graph is None:
                assert fast is None or not fast.any()
                assert graph is None or not graph.any()
                continue
            np.testing.assert_allclose(fast, graph, rtol=1e-9, atol=1e-12, err_msg=repr(example))


def test_every_public_op_is_registered_under_its_name():
    for op in OPS:
        assert sadl.ops.get(op.name) is op
        assert getattr(sadl_layers, op.name) is op
        assert getattr(sadl_layers.ops, op.name) is op
    assert {op.name for op in OPS} <= set(sadl_layers.__all__)
    registered = set(sadl.ops.names())
    for op in INTERNAL_OPS:
        assert op.name not in registered  # backward ops are not public names


def test_without_sadl_layers_a_missing_name_says_to_install_it(monkeypatch):
    monkeypatch.setenv("SADL_DISABLE_PLUGINS", "layers")
    reload_plugins()
    try:
        with pytest.raises(UnknownNameError, match="sadl-layers"):
            sadl.ops.get("cross_entropy")
        with pytest.raises(UnknownNameError, match="sadl-layers"):
            sadl.nn.Linear  # noqa: B018
    finally:
        monkeypatch.delenv("SADL_DISABLE_PLUGINS")
        reload_plugins()
    assert sadl.nn.Linear is sadl_layers.Linear


# ------------------------------------------------------------------------- numerics


def test_normal_cdf_float64_is_exact():
    x = np.linspace(-9.0, 9.0, 2001)
    exact = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    np.testing.assert_allclose(normal_cdf(x), exact, rtol=1e-13, atol=0)


def test_normal_cdf_float32_is_accurate_to_float32_resolution():
    """float32 takes torch's formula (1 + erf(x / sqrt 2)) / 2 on core's fast float32 erf: the
    error is absolute (about one float32 ulp of 1), so the far negative tail is not resolved
    relative to its size (torch's GELU has the same property); float64 is exact above."""
    x = np.linspace(-12.0, 12.0, 40001).astype(np.float32)
    got = normal_cdf(x)
    assert got.dtype == np.float32
    exact = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2.0)) for v in x])
    assert np.max(np.abs(got - exact)) < 2.5e-7
    assert np.all(got[x < -6] < 1e-7) and np.all(got >= 0) and np.all(got <= 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_is_finite_for_logits_of_plus_minus_1000(dtype):
    logits = sadl.Tensor(
        np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0]], dtype=dtype),
        requires_grad=True,
    )
    loss = sadl.ops.cross_entropy(logits, np.array([1, 2]), label_smoothing=0.1)
    loss.backward()
    assert loss.dtype == dtype and logits.grad.dtype == dtype
    assert np.isfinite(loss.item()) and np.isfinite(logits.grad).all()
    # target 1 of row 0 is 2000 below the max: loss ~ 0.9 * 2000 + smoothing terms
    assert loss.item() > 800.0


def test_losses_keep_float32():
    x = sadl.Tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    x.requires_grad_()
    for loss in (
        sadl.ops.cross_entropy(x, np.array([0, 1, 2, 0])),
        sadl.ops.nll_loss(x, np.array([0, 1, 2, 0])),
        sadl.ops.mse_loss(x, np.zeros((4, 3), np.float32)),
        sadl.ops.l1_loss(x, np.ones((4, 3), np.float32)),
        sadl.ops.binary_cross_entropy_with_logits(x, np.ones((4, 3), np.float32)),
    ):
        assert loss.dtype == np.float32
        x.grad = None
        loss.backward()
        assert x.grad.dtype == np.float32


def test_cross_entropy_all_ignored_gives_nan_mean_and_zero_gradient_like_torch():
    logits = sadl.Tensor(np.zeros((2, 3)), requires_grad=True)
    loss = sadl.ops.cross_entropy(logits, np.array([-100, -100]))
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(logits.grad, 0.0)
    assert sadl.ops.cross_entropy(logits, np.array([-100, -100]), reduction="sum").item() == 0.0


def test_cross_entropy_matches_log_softmax_definition():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 3, 5))
    t = rng.integers(0, 5, size=(2, 3))
    eps = 0.2
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    picked = np.take_along_axis(logp, t[..., None], -1)[..., 0]
    expected = -((1 - eps) * picked + eps * logp.mean(-1))
    got = sadl.ops.cross_entropy(z, t, label_smoothing=eps, reduction="none")
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got.shape == (2, 3)


def test_embedding_repeated_ids_accumulate():
    w = sadl.Tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    out = sadl.ops.embedding(w, np.array([[1, 1], [3, 1]]))
    out.sum().backward()
    np.testing.assert_array_equal(w.grad[:, 0], [0.0, 3.0, 0.0, 1.0])


def test_dropout_same_seed_same_mask_and_gradient_matches_mask():
    x = sadl.Tensor(np.ones((50, 40)), requires_grad=True)
    a = sadl.ops.dropout(x, p=0.3, seed=7)
    b = sadl.ops.dropout(x, p=0.3, seed=7)
    np.testing.assert_array_equal(a.data, b.data)
    kept = a.data != 0
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_allclose(a.data[kept], 1 / 0.7)
    a.sum().backward()
    np.testing.assert_array_equal(x.grad != 0, kept)
    with pytest.raises(ValueError, match="dropout: pass mask= .* or seed="):
        sadl.ops.dropout(x, p=0.3)


# ---------------------------------------------------------------------- attention


def _reference_attention(q, k, v, keep):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    return p @ v


def test_causal_mask_is_aligned_to_the_end_when_queries_are_fewer_than_keys():
    rng = np.random.default_rng(0)
    q, k, v = (
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((2, 7, 4)),
        rng.standard_normal((2, 7, 5)),
    )
    got = sadl.ops.scaled_dot_product_attention(q, k, v, causal=True)
    keep = np.arange(7)[None, :] <= np.arange(3)[:, None] + 4  # query i sees keys 0..4+i
    np.testing.assert_allclose(got, _reference_attention(q, k, v, keep), rtol=1e-10)
    # The last query row of a full causal pass equals a one-query step over the whole cache.
    full = sadl.ops.scaled_dot_product_attention(k, k, v, causal=True)
    step = sadl.ops.scaled_dot_product_attention(k[:, -1:], k, v, causal=True)
    np.testing.assert_allclose(step[:, 0], full[:, -1], rtol=1e-10)


def test_attention_row_that_sees_no_key_gives_zeros_not_nan():
    rng = np.random.default_rng(0)
    q = sadl.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    k = sadl.Tensor(rng.standard_normal((4, 3)), requires_grad=True)
    v = sadl.Tensor(rng.standard_normal((4, 2)), requires_grad=True)
    mask = np.array([[True, True, False, False], [False, False, False, False]])
    out = sadl.ops.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_array_equal(out.data[1], 0.0)
    out.sum().backward()
    assert np.isfinite(q.grad).all() and np.isfinite(k.grad).all()
    np.testing.assert_array_equal(q.grad[1], 0.0)
    np.testing.assert_allclose(out.data[0], _reference_attention(q.data, k.data, v.data, mask)[0])


def test_attention_slabs_cover_large_batches():
    """More heads than fit in one slab: the slab loop must give the unsplit result."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 9, 64, 8))
    k = rng.standard_normal((3, 9, 64, 8))
    v = rng.standard_normal((3, 9, 64, 4))
    keep = np.tri(64, 64, dtype=bool)
    got = sadl.ops.scaled_dot_product_attention(q, k, v, causal=True)
    np.testing.assert_allclose(got, _reference_attention(q, k, v, keep), rtol=1e-9)


@pytest.mark.parametrize(
    "name", ["scaled_dot_product_attention", "attention_qkv"], ids=lambda name: name
)
def test_causal_attention_in_halves_passes_the_battery_and_matches_one_piece(name, monkeypatch):
    """Long causal self-attention runs as two halves of the queries (the masked quarter of the
    scores is skipped); lowering the threshold runs every causal example that way."""
    from sadl_layers.ops import attention

    op = next(op for op in ALL_OPS if op.name == name)
    backward = next(o for o in ALL_OPS if o.name == f"{name}_backward")
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((2, 6, 12))
    drop = (rng.random((2, 2, 6, 6)) > 0.2) / 0.8
    args = (qkv,) if name == "attention_qkv" else (qkv[..., :4], qkv[..., 4:8], qkv[..., 8:])
    params = {"n_head": 2} if name == "attention_qkv" else {"causal": True}
    g = rng.standard_normal((2, 6, 4))
    results = []
    for split in (10**9, 4):
        monkeypatch.setattr(attention, "_CAUSAL_SPLIT", split)
        for dropout in (None, drop if name == "attention_qkv" else drop[:, 0]):
            out = op.forward(*args, **params, dropout_mask=dropout)
            results.append((out, backward.forward(g, out, *args, **params, dropout_mask=dropout)))
    for one_piece, halves in zip(results[:2], results[2:], strict=True):
        assert np.array_equal(one_piece[0], halves[0])  # forward: the same calls per query
        np.testing.assert_allclose(one_piece[1], halves[1], rtol=1e-12, atol=1e-12)
    report = check_op(op)  # gradcheck and gradgradcheck through the halves
    assert report.ok, str(report)
    report = check_op(backward)
    assert report.ok, str(report)
