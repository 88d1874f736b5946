"""Reductions where the naive NumPy call goes wrong, against torch: moments of half-precision
tensors (squares of |x| ~ 300 overflow float16) and running sums and products of a 0-d tensor.
"""

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("axis", [None, 1])
def test_moments_of_float16_accumulate_in_float32_as_torch(name, axis):
    x = (np.random.default_rng(0).normal(size=(4, 64)) * 40 + 300).astype(np.float16)
    ours = getattr(sadl.tensor(x), name)(axis=axis, ddof=1)
    theirs = getattr(torch.tensor(x), name)(dim=axis, correction=1)
    assert ours.dtype == np.float16 and np.isfinite(ours.numpy()).all()
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-3)


def test_moments_of_float16_backpropagate_finite_gradients():
    x = sadl.tensor(np.full((2, 8), 300.0, np.float16) + np.arange(8, dtype=np.float16))
    x.requires_grad_(True)
    x.std(axis=1).sum().backward()
    theirs = torch.tensor(x.numpy(), requires_grad=True)
    theirs.std(dim=1, correction=0).sum().backward()
    assert x.grad.dtype == np.float16
    np.testing.assert_allclose(x.grad, theirs.grad.numpy(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, -1])
def test_running_sum_and_product_of_a_0d_tensor_keep_its_shape(name, dim):
    x = sadl.tensor(np.float64(1.5), requires_grad=True)
    out = getattr(x, name)(dim)
    ref = getattr(torch.tensor(1.5, dtype=torch.float64), name)(dim)
    assert out.shape == tuple(ref.shape) == ()
    np.testing.assert_allclose(out.numpy(), ref.numpy())
    out.backward()
    np.testing.assert_allclose(x.grad, 1.0)


def test_running_sum_of_a_0d_tensor_refuses_other_axes():
    with pytest.raises(np.exceptions.AxisError):
        sadl.tensor(1.5).cumsum(1)
