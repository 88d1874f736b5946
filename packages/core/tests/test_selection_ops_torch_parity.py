"""PyTorch parity of the Tensor's selection methods (topk, cummax, cummin, gather, nonzero,
argwhere): forward, backward and, where torch supports it, double backward (float64, one op at a
time)."""

import numpy as np
import pytest
import sadl
from sadl_check.torch_parity import assert_matches_torch as check

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(1234)


def normal(*shape):
    return RNG.normal(size=shape)


def distinct(*shape):
    """Values without ties (so that gradients through max/sort are unambiguous)."""
    return RNG.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) / 7 - 1


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1])
def test_cummax_cummin(name, dim):
    x = normal(4, 5)
    x[1, 2] = x[0, 2]  # a tie: torch reports the later index
    values, indices = getattr(sadl.tensor(x), name)(dim)
    ref = getattr(torch, name)(torch.tensor(x), dim)
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    check(lambda t: getattr(t, name)(dim=dim).values, lambda t: getattr(t, name)(dim).values, x)


def test_cummax_propagates_nan_like_torch():
    x = np.array([1.0, np.nan, 3.0, np.nan, 0.0])
    values, indices = sadl.tensor(x).cummax(0)
    ref = torch.tensor(x).cummax(0)
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    np.testing.assert_array_equal(values.numpy(), ref.values.numpy())


def test_gather_with_an_index_smaller_than_the_input():
    x = normal(4, 5)
    index = np.array([[0, 3], [2, 2], [4, 1]])  # smaller than x outside dim 1 too
    check(lambda t: t.gather(1, index), lambda t: t.gather(1, torch.tensor(index)), x)
    check(
        lambda t: sadl.ops.gather(t, 0, index[:, :1] % 4),
        lambda t: torch.gather(t, 0, torch.tensor(index[:, :1] % 4)),
        x,
    )


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk(largest, dim):
    x = distinct(5, 6)
    values, indices = sadl.tensor(x).topk(3, dim=dim, largest=largest)
    ref = torch.tensor(x).topk(3, dim=dim, largest=largest)
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    check(
        lambda t: t.topk(3, dim=dim, largest=largest).values,
        lambda t: t.topk(3, dim=dim, largest=largest).values,
        x,
    )


def test_nonzero_and_argwhere():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    t = sadl.tensor(x, requires_grad=True)
    ref = torch.tensor(x)
    np.testing.assert_array_equal(t.argwhere().numpy(), torch.argwhere(ref).numpy())
    np.testing.assert_array_equal(t.nonzero(as_tuple=False).numpy(), ref.nonzero().numpy())
    for ours, theirs in zip(t.nonzero(), ref.nonzero(as_tuple=True)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert not t.argwhere().requires_grad
