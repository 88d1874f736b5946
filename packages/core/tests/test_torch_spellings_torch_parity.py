"""PyTorch's own spellings on the Tensor give what torch gives: ``dim=``/``keepdim=`` on every
reduction, ``max``/``min``/``sort`` with ``dim=`` as ``(values, indices)``, ``size(dim)``,
``numel``, ``dim``, ``t``, ``contiguous``, ``masked_fill``, ``where``, ``split``, ``chunk``,
``type_as``, ``view_as``, ``new_zeros``, ``eq``, ``bmm`` (float64: forward, gradient and second
derivative); where NumPy's meaning of a name stays, the difference is the documented one.
"""

import pickle

import numpy as np
import pytest
import sadl
from sadl_check.torch_parity import assert_matches_torch as check

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")

RNG = np.random.default_rng(7)
X = RNG.permutation(24).reshape(2, 3, 4) / 5.0 - 2  # no ties: max/sort gradients are unambiguous
MASK = RNG.random((3, 4)) > 0.5


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "logsumexp", "norm"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_every_reduction_takes_dim_and_keepdim(name, keepdim):
    theirs = {"norm": lambda t, **kw: torch.linalg.vector_norm(t, **kw)}.get(
        name, lambda t, **kw: getattr(t, name)(**kw)
    )
    check(
        lambda t: getattr(t, name)(dim=1, keepdim=keepdim),
        lambda t: theirs(t, dim=1, keepdim=keepdim),
        X,
    )


@pytest.mark.parametrize("name", ["var", "std"])
def test_moments_take_correction_and_unbiased_and_keep_numpys_default(name):
    check(lambda t: getattr(t, name)(dim=2, correction=1), lambda t: getattr(t, name)(2), X)
    check(
        lambda t: getattr(t, name)(dim=0, keepdim=True, unbiased=False),
        lambda t: getattr(t, name)(0, keepdim=True, unbiased=False),
        X,
    )
    ours = getattr(sadl.tensor(X), name)().item()  # NumPy's ddof=0, not torch's default 1
    np.testing.assert_allclose(ours, getattr(torch.tensor(X), name)(correction=0).item())


def test_a_misspelt_reduction_keyword_names_the_method_not_an_internal():
    with pytest.raises(
        TypeError, match=r"^Tensor\.mean\(\) got an unexpected keyword argument 'keepdimx'"
    ):
        sadl.tensor(X).mean(dim=1, keepdimx=True)
    with pytest.raises(TypeError, match=r"Tensor\.sum\(\): give keepdims= or keepdim=, not both"):
        sadl.tensor(X).sum(1, True, keepdim=True)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_with_dim_give_values_and_indices(name, keepdim):
    ours = getattr(sadl.tensor(X), name)(dim=1, keepdim=keepdim)
    theirs = getattr(torch.tensor(X), name)(dim=1, keepdim=keepdim)
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    check(
        lambda t: getattr(t, name)(dim=1, keepdim=keepdim).values,
        lambda t: getattr(t, name)(dim=1, keepdim=keepdim).values,
        X,
    )
    assert getattr(sadl.tensor(X), name)(1).shape == (2, 4)  # NumPy's axis: values only


def test_sort_with_dim_gives_values_and_indices():
    values, indices = sadl.tensor(X).sort(dim=-1, descending=True)
    ref = torch.tensor(X).sort(dim=-1, descending=True)
    np.testing.assert_array_equal(values.numpy(), ref.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    check(lambda t: t.sort(dim=1).values, lambda t: t.sort(dim=1).values, X)


def test_size_numel_dim_t_contiguous():
    ours, theirs = sadl.tensor(X), torch.tensor(X)
    assert ours.size() == tuple(theirs.size()) and ours.size(-1) == theirs.size(-1) == 4
    assert ours.size == X.size and pickle.loads(pickle.dumps(ours.size)) == 24  # NumPy's count
    assert ours.numel() == theirs.numel() and ours.dim() == theirs.dim()
    check(lambda t: t[0].t(), lambda t: t[0].t(), X)
    check(lambda t: t[0, 0].t(), lambda t: t[0, 0].t(), X)
    check(lambda t: t.transpose(0, 2).contiguous(), lambda t: t.transpose(0, 2).contiguous(), X)
    with pytest.raises(ValueError, match="at most 2"):
        ours.t()


def test_masked_fill_and_where():
    mask = MASK
    check(
        lambda t: t.masked_fill(mask, -1.5),
        lambda t: t.masked_fill(torch.tensor(mask), -1.5),
        X,
    )
    check(
        lambda t, u: t.where(mask, u),
        lambda t, u: t.where(torch.tensor(mask), u),
        X,
        X[0] * 2,
    )


@pytest.mark.parametrize("size", [1, 2, 3, [1, 3], [2, 0, 2]])
def test_split_and_chunk_cut_as_torch(size):
    for dim in (0, 2):
        if isinstance(size, list) and sum(size) != X.shape[dim]:
            continue
        ours = sadl.tensor(X).split(size, dim)
        theirs = torch.tensor(X).split(size, dim)
        assert [p.shape for p in ours] == [tuple(p.shape) for p in theirs]
        for k in range(len(theirs)):
            piece = lambda t, d=dim, k=k: t.split(size, d)[k]
            check(piece, piece, X)
    if isinstance(size, int):
        for dim in (1, 2):
            ours, theirs = sadl.tensor(X).chunk(size, dim), torch.tensor(X).chunk(size, dim)
            assert [p.shape for p in ours] == [tuple(p.shape) for p in theirs]


def test_type_as_view_as_new_zeros_eq_bmm():
    ours, theirs = sadl.tensor(X), torch.tensor(X)
    assert ours.type_as(sadl.zeros(1)).dtype == np.float32
    assert str(theirs.type_as(torch.zeros(1)).dtype) == "torch.float32"
    check(lambda t: t.view_as(np.zeros((6, 4))), lambda t: t.view_as(torch.zeros(6, 4)), X)
    zeros = ours.new_zeros(2, 5)
    assert zeros.shape == (2, 5) and zeros.dtype == np.float64 and not zeros.numpy().any()
    assert ours.new_zeros((3,)).shape == tuple(theirs.new_zeros((3,)).shape)
    np.testing.assert_array_equal(ours.eq(ours.round()).numpy(), theirs.eq(theirs.round()).numpy())
    check(lambda a, b: a.bmm(b), lambda a, b: a.bmm(b), X, RNG.normal(size=(2, 4, 5)))
    with pytest.raises(ValueError, match="3-d"):
        ours[0].bmm(ours[0].T)
