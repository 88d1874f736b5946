"""PyTorch parity for the tensor vocabulary torch users reach for: forward, backward and, where
torch supports it, double backward (float64, one op at a time)."""

import numpy as np
import pytest
import sadl
from sadl_check.torch_parity import assert_matches_torch as check

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(1234)


def normal(*shape):
    return RNG.normal(size=shape)


# ------------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_mode(mode):
    a, b = normal(3, 4) * 5, np.where(RNG.random((3, 4)) < 0.5, -1.3, 0.7)
    check(
        lambda x, y: x.div(y, rounding_mode=mode),
        lambda x, y: torch.div(x, y, rounding_mode=mode),
        a,
        b,
    )
    ints_a, ints_b = np.array([7, -7, 7, -7, 6]), np.array([2, 2, -2, -2, 3])
    ours = sadl.tensor(ints_a).div(sadl.tensor(ints_b), rounding_mode=mode)
    theirs = torch.div(torch.tensor(ints_a), torch.tensor(ints_b), rounding_mode=mode)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    check(lambda x, y: x.div(y), lambda x, y: torch.div(x, y), a, b)


@pytest.mark.parametrize("name", ["sign", "floor", "ceil", "trunc", "round"])
def test_piecewise_constant_ops_differentiate_to_zero(name):
    check(lambda t: getattr(t, name)() * t, lambda t: getattr(t, name)() * t, normal(3, 4))


# ----------------------------------------------------------------------------- shapes


def test_squeeze_of_an_axis_that_is_not_one_is_a_no_op():
    x = normal(3, 1, 4)
    check(lambda t: t.squeeze(0), lambda t: t.squeeze(0), x)
    check(lambda t: t.squeeze(dim=1), lambda t: t.squeeze(1), x)
    assert sadl.tensor(x).squeeze((0, 1)).shape == torch.tensor(x).squeeze((0, 1)).shape
    with pytest.raises(np.exceptions.AxisError):
        sadl.tensor(x).squeeze(3)


@pytest.mark.parametrize("name", ["isinf"])  # isneginf, isposinf: sadl-layers' tests
def test_infinity_tests_match_torch_as_ops_and_numpy_functions(name):
    values = np.array([-np.inf, -1.0, 0.0, np.inf, np.nan, 3.0])
    want = getattr(torch, name)(torch.tensor(values)).numpy()
    x = sadl.tensor(values, requires_grad=True)
    for got in (getattr(sadl.ops, name)(x), getattr(np, name)(x)):
        assert got.dtype == np.bool_ and not got.requires_grad
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize(
    "src, dst, tdst",
    [
        (np.float32, np.int32, torch.int32),
        (np.float64, np.int64, torch.int64),
        (np.float32, np.uint8, torch.uint8),
        (np.int16, np.float16, torch.float16),
        (np.float32, np.float64, torch.float64),  # last axis halves
    ],
)
def test_view_dtype_reinterprets_bytes_like_torch(src, dst, tdst):
    values = RNG.normal(size=(3, 4)).astype(src)
    x = sadl.tensor(values)
    want = torch.from_numpy(values.copy()).view(tdst).numpy()
    for got in (x.view(dst), sadl.ops.bitcast(x, dtype=dst)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy().view(np.uint8), want.view(np.uint8))
    assert x.view(2, 6).shape == (2, 6)  # view(shape) is still reshape
