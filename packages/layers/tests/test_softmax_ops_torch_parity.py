"""The softmax ops sadl-layers' attention and cross-entropy apply (masked_softmax,
masked_log_softmax and their backward ops) against torch, in float64, masks included."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl_layers.ops._softmax import (
    LOG_SOFTMAX_BACKWARD,
    MASKED_LOG_SOFTMAX,
    MASKED_SOFTMAX,
    SOFTMAX_BACKWARD,
)

torch = pytest.importorskip("torch")

CASES = [((4, 7), None, -1), ((3, 5, 4), (5, 1), 1), ((2, 3, 6, 5), (6, 5), -2)]


def _mask(shape, rng):
    if shape is None:
        return None
    m = rng.standard_normal(shape)
    m[rng.random(shape) < 0.2] = -np.inf
    m.flat[0] = 0.0  # every reduced slice keeps at least one finite entry below
    return np.where(np.isneginf(m).all(axis=0, keepdims=True), 0.0, m)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape, mask_shape, axis", CASES)
def test_masked_softmax_forward_and_gradients_match_torch(log, shape, mask_shape, axis):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 4
    mask = _mask(mask_shape, rng)
    w = rng.standard_normal(shape)
    op = MASKED_LOG_SOFTMAX if log else MASKED_SOFTMAX
    t = sadl.tensor(x, requires_grad=True)
    y = op(t, mask, axis=axis)
    (y * sadl.tensor(w)).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    tin = tx if mask is None else tx + torch.tensor(mask)
    ty = torch.log_softmax(tin, axis) if log else torch.softmax(tin, axis)
    (ty * torch.tensor(w)).sum().backward()
    finite = np.isfinite(ty.detach().numpy())
    np.testing.assert_allclose(
        y.numpy()[finite], ty.detach().numpy()[finite], rtol=1e-12, atol=1e-12
    )
    assert np.array_equal(np.isfinite(y.numpy()), finite)
    np.testing.assert_allclose(t.grad, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("log", [False, True])
def test_the_backward_ops_are_torchs_vector_jacobian_products(log):
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal((2, 3, 5)) * 3, rng.standard_normal((2, 3, 5))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.log_softmax(tx, 1) if log else torch.softmax(tx, 1)
    (expected,) = torch.autograd.grad(ty, tx, torch.tensor(g))
    backward = LOG_SOFTMAX_BACKWARD if log else SOFTMAX_BACKWARD
    got = backward(g, ty.detach().numpy(), axis=1)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12, atol=1e-12)


def test_an_axis_of_no_elements_gives_an_empty_result():
    assert MASKED_SOFTMAX(np.empty((3, 0)), axis=-1).shape == (3, 0)
    assert MASKED_LOG_SOFTMAX(np.empty((0, 4)), axis=0).shape == (0, 4)
