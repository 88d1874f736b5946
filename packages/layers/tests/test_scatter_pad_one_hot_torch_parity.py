"""PyTorch parity of sadl-layers' scatter family, pad and one_hot (``sadl.ops.scatter``, ...):
forward, backward and, where torch supports it, double backward (float64, one op at a time)."""

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


def test_one_hot():
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
        lambda a, b: sadl.ops.scatter(a, 0, index, b),
        lambda a, b: a.scatter(0, torch.tensor(index), b),
        x,
        src,
    )
    check(
        lambda a: sadl.ops.scatter(a, 0, index, 2.5),
        lambda a: a.scatter(0, torch.tensor(index), 2.5),
        x,
    )
    repeats = np.array([[0, 1, 1, 3, 0], [0, 1, 1, 0, 0], [3, 3, 0, 1, 0]])
    check(
        lambda a, b: sadl.ops.scatter_add(a, 0, repeats, b),
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
        sadl.ops.scatter_add(x, 0, np.array([[0, 3]]), sadl.tensor(normal(1, 2)))
    with pytest.raises(ValueError, match="dimensions"):
        x.gather(1, np.array([0, 1]))
    with pytest.raises(TypeError, match="integer"):
        x.gather(1, np.array([[0.0]]))
    with pytest.raises(ValueError, match="reduce must be"):
        sadl.ops.scatter_reduce(x, 0, np.array([[0]]), x, reduce="max")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x, src = distinct(4, 5), distinct(3, 5) + 0.05  # no value shared by self and src
    index = np.array([[0, 1, 1, 3, 0], [0, 1, 2, 0, 0], [3, 3, 0, 1, 0]])
    if reduce == "prod":
        src[0, 1] = 0.0  # one zero among the values written to a position
    check(
        lambda a, b: sadl.ops.scatter_reduce(
            a, 0, index, b, reduce=reduce, include_self=include_self
        ),
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
    sadl.ops.scatter_reduce(a, 0, index, b, reduce="amax", include_self=False).sum().backward()
    np.testing.assert_allclose(b.grad, [[0.5, 0.5], [0.5, 0.5]])
    np.testing.assert_allclose(a.grad, [[0.0, 0.0]])
