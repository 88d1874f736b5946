"""PyTorch parity of the core Tensor methods whose ops sadl-layers provides (topk, cummax, gather,
scatter, scatter_reduce, pad, nonzero, one_hot): forward, backward and, where torch supports it,
double backward (float64, one op at a time)."""

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


def test_nonzero_argwhere_one_hot():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    t = sadl.tensor(x, requires_grad=True)
    ref = torch.tensor(x)
    np.testing.assert_array_equal(t.argwhere().numpy(), torch.argwhere(ref).numpy())
    np.testing.assert_array_equal(t.nonzero(as_tuple=False).numpy(), ref.nonzero().numpy())
    for ours, theirs in zip(t.nonzero(), ref.nonzero(as_tuple=True)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert not t.argwhere().requires_grad
    labels = np.array([[0, 3], [2, 2]])
    for classes in (-1, 6):
        ours = sadl.ops.one_hot(sadl.tensor(labels), num_classes=classes)
        theirs = F.one_hot(torch.tensor(labels), num_classes=classes)
        assert ours.dtype == np.int64
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(ValueError, match="lie in"):
        sadl.ops.one_hot(np.array([0, 4]), num_classes=3)
    with pytest.raises(TypeError, match="integers"):
        sadl.ops.one_hot(np.array([0.0, 1.0]))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode):
    x = normal(2, 3, 4, 5)
    width = ((0, 0), (0, 0), (1, 2), (2, 1))  # torch lists the last axis first
    check(lambda t: np.pad(t, width, mode=mode), lambda t: F.pad(t, (2, 1, 1, 2), mode=mode), x)
    with sadl.no_grad():
        np.testing.assert_array_equal(
            np.pad(sadl.tensor(x), width, mode=mode).numpy(),
            F.pad(torch.tensor(x), (2, 1, 1, 2), mode=mode).numpy(),
        )


def test_scatter_and_scatter_add():
    x, src = normal(4, 5), normal(3, 5)
    index = np.array([[0, 1, 2, 3, 0], [1, 2, 3, 0, 1], [2, 3, 0, 1, 2]])  # no repeats per column
    check(
        lambda a, b: a.scatter(0, index, b),
        lambda a, b: a.scatter(0, torch.tensor(index), b),
        x,
        src,
    )
    check(
        lambda a: a.scatter(0, index, value=2.5),
        lambda a: a.scatter(0, torch.tensor(index), 2.5),
        x,
    )
    repeats = np.array([[0, 1, 1, 3, 0], [0, 1, 1, 0, 0], [3, 3, 0, 1, 0]])
    check(
        lambda a, b: a.scatter_add(0, repeats, b),
        lambda a, b: a.scatter_add(0, torch.tensor(repeats), b),
        x,
        src,
    )
    check(
        lambda a, b: sadl.ops.scatter_add(a, 1, repeats[:, :3] % 5, b),
        lambda a, b: torch.scatter_add(a, 1, torch.tensor(repeats[:, :3] % 5), b),
        x[:3],
        src[:, :3],
    )


def test_scatter_checks_its_index():
    x = sadl.tensor(normal(3, 4))
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        x.scatter_add(0, np.array([[0, 3]]), sadl.tensor(normal(1, 2)))
    with pytest.raises(ValueError, match="dimensions"):
        x.gather(1, np.array([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        x.gather(1, np.array([[0.0]]))
    with pytest.raises(ValueError, match="reduce must be"):
        x.scatter_reduce(0, np.array([[0]]), x, "max")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x, src = distinct(4, 5), distinct(3, 5) + 0.05  # no value shared by self and src
    index = np.array([[0, 1, 1, 3, 0], [0, 1, 2, 0, 0], [3, 3, 0, 1, 0]])
    if reduce == "prod":
        src[0, 1] = 0.0  # one zero among the values written to a position
    check(
        lambda a, b: a.scatter_reduce(0, index, b, reduce, include_self=include_self),
        lambda a, b: a.scatter_reduce(0, torch.tensor(index), b, reduce, include_self=include_self),
        x,
        src,
    )


def test_scatter_reduce_ties_share_the_gradient_evenly():
    # Torch also counts self when include_self=False (its gradients then sum to less than 1);
    # here a tie is shared among the values that took part, as central differences see it.
    x = np.array([[1.0, 5.0]])
    src = np.array([[3.0, 2.0], [3.0, 2.0]])
    index = np.array([[0, 0], [0, 0]])
    a, b = sadl.tensor(x, requires_grad=True), sadl.tensor(src, requires_grad=True)
    a.scatter_reduce(0, index, b, "amax", include_self=False).sum().backward()
    np.testing.assert_allclose(b.grad, [[0.5, 0.5], [0.5, 0.5]])
    np.testing.assert_allclose(a.grad, [[0.0, 0.0]])


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
