"""Softmax and log-softmax kernels: used for the recorded applications of the softmax ops
(the attention's, cross-entropy's, core's ``softmax``/``log_softmax``), by name, within the
stated tolerance of eager (float32 atol = rtol = 1e-5, float64 1e-13)."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from kernel_cases import assert_close, eager_and_compiled, kernels_in

pytest.importorskip("numba")
_softmax_ops = pytest.importorskip("sadl_layers.ops._softmax")

TOL = {np.float32: 1e-5, np.float64: 1e-13}


def attention_causal(q, k, v, g):
    y = sadl.ops.scaled_dot_product_attention(q, k, v, causal=True)
    (y * g).sum().backward()
    return y


def attention_plain(q, k, v, g):
    y = sadl.ops.scaled_dot_product_attention(q, k, v)
    (y * g).sum().backward()
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("step", [attention_causal, attention_plain])
@pytest.mark.parametrize("shape", [(2, 3, 16, 8), (2, 16, 8)])  # with and without a head axis
def test_the_attention_softmax_kernels_match_eager(dtype, step, shape):
    rng = np.random.default_rng(1)
    q, k, v, g = (rng.standard_normal(shape).astype(dtype) for _ in range(4))
    q *= 4  # large scores: the max shift matters
    out_e, out_c, ge, gc, compiled = eager_and_compiled(step, [q, k, v, g])
    assert kernels_in(compiled, "masked_softmax") == 1  # the backward reads the forward's
    assert kernels_in(compiled, "softmax_backward") == 1
    assert_close(out_c, out_e, TOL[dtype])
    for e, c in zip(ge[:3], gc[:3]):
        assert_close(c, e, TOL[dtype])


def test_the_softmax_kernel_with_extreme_scores_stays_finite():
    q = np.zeros((1, 1, 4, 2), np.float32)
    q[0, 0, :, 0] = [1000, -1000, 0, 500]
    k = q.copy()
    v = np.arange(8, dtype=np.float32).reshape(1, 1, 4, 2)
    out_e, out_c, *_, compiled = eager_and_compiled(attention_plain, [q, k, v, np.ones_like(v)])
    assert kernels_in(compiled, "masked_softmax") == 1
    assert np.isfinite(out_c.numpy()).all()
    assert_close(out_c, out_e, 1e-5)


def test_a_query_that_sees_no_key_gets_zeros_through_the_kernels():
    rng = np.random.default_rng(2)
    q, k, v, g = (rng.standard_normal((2, 2, 4, 3)).astype(np.float32) for _ in range(4))
    keep = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=bool)

    def step(q, k, v, g):
        y = sadl.ops.scaled_dot_product_attention(q, k, v, mask=keep)
        (y * g).sum().backward()
        return y

    out_e, out_c, ge, gc, compiled = eager_and_compiled(step, [q, k, v, g])
    assert kernels_in(compiled, "masked_softmax") == 1
    assert np.all(out_c.numpy()[:, :, 1] == 0)
    assert_close(out_c, out_e, 1e-5)
    for e, c in zip(ge[:3], gc[:3]):
        assert_close(c, e, 1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_runs_its_log_softmax_and_its_gradients_softmax_as_kernels(dtype, smoothing):
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((48, 65)) * 5).astype(dtype)
    targets = rng.integers(0, 65, 48)

    def step(z):
        loss = sadl.ops.cross_entropy(z, targets, label_smoothing=smoothing)
        loss.backward()
        return loss

    out_e, out_c, ge, gc, compiled = eager_and_compiled(step, [logits])
    assert kernels_in(compiled, "masked_log_softmax") == 1
    assert kernels_in(compiled, "masked_softmax") == 1
    assert_close(out_c, out_e, TOL[dtype])
    assert_close(gc[0], ge[0], TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, axis", [("softmax", -1), ("log_softmax", 0), ("softmax", 1)])
def test_cores_softmax_ops_run_as_kernels_forward(dtype, name, axis):
    x = (np.random.default_rng(4).standard_normal((6, 7, 5)) * 3).astype(dtype)
    w = np.random.default_rng(5).standard_normal(x.shape).astype(dtype)

    def step(t):
        y = getattr(t, name)(axis)
        (y * w).sum().backward()
        return y

    out_e, out_c, ge, gc, compiled = eager_and_compiled(step, [x])
    assert kernels_in(compiled, name) == 1
    assert_close(out_c, out_e, TOL[dtype])
    assert_close(gc[0], ge[0], TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True])
def test_the_softmax_ops_forward_and_backward_kernels_match_eager(dtype, log):
    """masked_(log_)softmax with a broadcast additive mask, and its backward op."""
    op = _softmax_ops.MASKED_LOG_SOFTMAX if log else _softmax_ops.MASKED_SOFTMAX
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((3, 9, 4)) * 3).astype(dtype)
    mask = np.where(rng.random((9, 1)) < 0.2, -30.0, 0.0).astype(dtype)
    w = rng.standard_normal(x.shape).astype(dtype)

    def step(t):
        y = op(t, mask, axis=1)
        (y * w).sum().backward()
        return y

    out_e, out_c, ge, gc, compiled = eager_and_compiled(step, [x])
    name = "masked_log_softmax" if log else "masked_softmax"
    assert kernels_in(compiled, name) == 1
    assert kernels_in(compiled, "log_softmax_backward" if log else "softmax_backward") == 1
    assert_close(out_c, out_e, TOL[dtype])
    assert_close(gc[0], ge[0], TOL[dtype])


def test_switching_the_softmax_kernel_off_leaves_the_ops_numpy_and_exact(monkeypatch):
    monkeypatch.setenv("SADL_KERNELS_DISABLE", "softmax")
    rng = np.random.default_rng(7)
    q, k, v, g = (rng.standard_normal((2, 3, 16, 8)).astype(np.float32) for _ in range(4))
    out_e, out_c, ge, gc, compiled = eager_and_compiled(attention_causal, [q, k, v, g])
    assert kernels_in(compiled, "masked_softmax") == kernels_in(compiled, "softmax_backward") == 0
    np.testing.assert_array_equal(out_c.numpy(), out_e.numpy())
    for e, c in zip(ge[:3], gc[:3]):
        np.testing.assert_array_equal(c, e)
