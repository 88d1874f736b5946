"""float16 against torch on CPU (skipped without torch): the norms, norm, mse_loss, GELU and
attention accumulate in float32 as torch's CPU kernels do, and return float16.

With |x| of about 300 a float16 sum of squares overflows (65504 is the largest float16), so a
norm computed in float16 divides by inf and returns zeros, and the tanh GELU's cubic makes its
gradient 0 * inf = NaN. NumPy has no bfloat16, so there is nothing to compare there: a bfloat16
array (from ml_dtypes) cannot require grad in core, and an op given one refuses it with a hint to
cast to float32 (``check_float``).
"""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers import (
    BatchNorm1d,
    GroupNorm,
    InstanceNorm1d,
    LayerNorm,
    RMSNorm,
)

torch = pytest.importorskip("torch", reason="PyTorch is the reference for float16")
F = torch.nn.functional
pytestmark = pytest.mark.torch


def _half(*shape, scale=300.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float16)


def _close(got, want, what, rtol=2e-2, atol=2e-2):
    """Within float16 rounding of torch's float16 result, relative to its magnitude."""
    want = want.detach().numpy().astype(np.float64)
    got = np.asarray(got, dtype=np.float64)
    assert np.isfinite(got).all() == np.isfinite(want).all(), what
    bound = atol * max(1.0, float(np.abs(want).max())) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=bound, err_msg=what)


def _compare(fn, tfn, *arrays, **tol):
    """Forward and backward of fn (sadl) and tfn (torch) on the same float16 arrays."""
    xs = [sadl.Tensor(a.copy(), requires_grad=True) for a in arrays]
    txs = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
    out, tout = fn(*xs), tfn(*txs)
    assert out.dtype == np.float16
    _close(out.data, tout, "output", **tol)
    w = np.random.default_rng(7).uniform(0.5, 1.5, size=out.shape).astype(np.float16)
    (out * w).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for i, (x, tx) in enumerate(zip(xs, txs)):
        assert x.grad.dtype == np.float16
        _close(x.grad, tx.grad, f"gradient {i}", **tol)


def _affine(n, seed=1):
    return _half(n, scale=1.0, seed=seed), _half(n, scale=1.0, seed=seed + 1)


def test_layer_norm_of_large_float16_inputs_matches_torch():
    w, b = _affine(8)
    _compare(
        lambda x, w, b: sadl.ops.layer_norm(x, w, b),
        lambda x, w, b: F.layer_norm(x, (8,), w, b),
        _half(6, 8),
        w,
        b,
    )


def test_rms_norm_of_large_float16_inputs_matches_torch():
    _compare(
        lambda x, w: sadl.ops.rms_norm(x, w),
        lambda x, w: F.rms_norm(x, (8,), w),
        _half(6, 8),
        _affine(8)[0],
    )


def test_batch_norm_of_large_float16_inputs_matches_torch():
    w, b = _affine(4)
    _compare(
        lambda x, w, b: sadl.ops.batch_norm(x, w, b, training=True),
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        _half(16, 4, 3),
        w,
        b,
    )


def test_group_and_instance_norm_of_large_float16_inputs_match_torch():
    w, b = _affine(4)
    x = _half(3, 4, 6)
    _compare(
        lambda x, w, b: sadl.ops.group_norm(x, 2, w, b),
        lambda x, w, b: F.group_norm(x, 2, w, b),
        x,
        w,
        b,
    )
    _compare(
        lambda x, w, b: sadl.ops.instance_norm(x, None, None, w, b),
        lambda x, w, b: F.instance_norm(x, None, None, w, b),
        x,
        w,
        b,
    )


@pytest.mark.parametrize(
    "make, tmake, shape",
    [
        (lambda: LayerNorm(8, dtype=np.float16), lambda: torch.nn.LayerNorm(8), (5, 8)),
        (lambda: RMSNorm(8, dtype=np.float16), lambda: torch.nn.RMSNorm(8), (5, 8)),
        (lambda: GroupNorm(2, 4, dtype=np.float16), lambda: torch.nn.GroupNorm(2, 4), (5, 4, 3)),
        (lambda: BatchNorm1d(8, dtype=np.float16), lambda: torch.nn.BatchNorm1d(8), (5, 8)),
        (
            lambda: InstanceNorm1d(4, affine=True, dtype=np.float16),
            lambda: torch.nn.InstanceNorm1d(4, affine=True),
            (5, 4, 6),
        ),
    ],
)
def test_float16_norm_layers_do_not_return_zeros(make, tmake, shape):
    layer, tlayer = make(), tmake().half()
    x = _half(*shape)
    _compare(layer, tlayer, x)
    assert np.abs(layer(sadl.Tensor(x)).data).max() > 0.5  # normalized values, not zeros
    for name, p in layer.named_parameters():
        assert p.grad.dtype == np.float16
        _close(p.grad, dict(tlayer.named_parameters())[name].grad, name)


def test_norm_and_normalize_of_large_float16_inputs_are_finite_like_torch():
    x = _half(4, 8)
    _compare(lambda t: sadl.ops.norm(t), lambda t: torch.linalg.vector_norm(t), x)
    _compare(lambda t: sadl.ops.norm(t, axis=1), lambda t: torch.linalg.vector_norm(t, dim=1), x)
    _compare(lambda t: sadl.ops.normalize(t), lambda t: F.normalize(t), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_of_float16_accumulates_in_float32_like_torch(reduction):
    # squares of 150 fit float16 (22500), their sum does not: torch's mean is finite
    x, y = _half(4, 8, scale=1.0) + np.float16(150), _half(4, 8, scale=1.0, seed=1)
    _compare(
        lambda a, b: sadl.ops.mse_loss(a, b, reduction=reduction),
        lambda a, b: F.mse_loss(a, b, reduction=reduction),
        x,
        y,
    )


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_gradient_of_large_float16_inputs_is_finite_like_torch(approximate):
    x = np.array([-3000.0, -300.0, -100.0, -2.0, 0.0, 1.5, 100.0, 250.0, 6e4], dtype=np.float16)
    _compare(
        lambda t: sadl.ops.gelu(t, approximate=approximate),
        lambda t: F.gelu(t, approximate=approximate),
        x,
    )


def test_attention_of_float16_matches_torch():
    q, k, v = (_half(2, 3, 4, scale=3.0, seed=s) for s in range(3))
    _compare(
        sadl.ops.scaled_dot_product_attention, F.scaled_dot_product_attention, q, k, v, atol=1e-2
    )


def test_a_bfloat16_array_is_refused_with_a_hint_to_cast():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays come from ml_dtypes")
    x = np.ones((2, 4), dtype=ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match="no bfloat16.*cast to float32"):
        sadl.ops.layer_norm(x, None, None)
    with pytest.raises(TypeError, match="bfloat16"):
        sadl.Tensor(x, requires_grad=True)  # core refuses to differentiate it at all


def test_mixed_float16_and_float32_inputs_keep_the_promoted_dtype():
    half, single = _half(4, 8, scale=1.0), _half(4, 8, scale=1.0, seed=1).astype(np.float32)
    assert sadl.ops.mse_loss(sadl.tensor(half), sadl.tensor(single)).dtype == np.float32
    q = sadl.tensor(_half(2, 3, 4, scale=1.0))
    kv = sadl.tensor(_half(2, 3, 4, scale=1.0, seed=2).astype(np.float32))
    assert sadl.ops.scaled_dot_product_attention(q, kv, kv).dtype == np.float32
    w = sadl.tensor(np.ones(8, np.float32))  # a float32 LayerNorm on float16 rows: float16 out
    assert sadl.ops.layer_norm(sadl.tensor(_half(4, 8)), w, None).dtype == np.float16
