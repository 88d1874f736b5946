"""PyTorch parity for the tensor vocabulary torch users reach for: forward, backward and, where
torch supports it, double backward (float64, one op at a time)."""

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(1234)


def _close(ours, theirs, what):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    ours = ours.numpy() if hasattr(ours, "numpy") else np.asarray(ours)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12, err_msg=what)


def _as_float(grads, inputs):
    return [np.zeros(x.shape) if g is None else g for g, x in zip(grads, inputs)]


def check(ours, theirs, *inputs, double=True):
    """Compare forward, first and (``double``) second derivatives of two float64 functions."""
    xs = [sadl.tensor(a, requires_grad=True) for a in inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, ref = ours(*xs), theirs(*ts)
    _close(out, ref, "forward")
    w = RNG.normal(size=out.shape)
    grads = sadl.grad((out * w).sum(), xs, create_graph=double, allow_unused=True)
    ref_grads = torch.autograd.grad(
        (ref * torch.tensor(w)).sum(), ts, create_graph=double, allow_unused=True
    )
    for g, r, x in zip(grads, ref_grads, inputs):
        _close(np.zeros(x.shape) if g is None else g, np.zeros(x.shape) if r is None else r, "grad")
    if not double:
        return
    vs = [RNG.normal(size=np.shape(a)) for a in inputs]
    ours2 = [(g * v).sum() for g, v in zip(grads, vs) if g is not None and g.requires_grad]
    theirs2 = [(g * torch.tensor(v)).sum() for g, v in zip(ref_grads, vs) if g is not None]
    theirs2 = [t for t in theirs2 if t.requires_grad]
    second = [None] * len(xs)
    if ours2:
        second = sadl.grad(sum(ours2[1:], ours2[0]), xs, allow_unused=True)
    ref_second = [None] * len(ts)
    if theirs2:
        ref_second = torch.autograd.grad(sum(theirs2[1:], theirs2[0]), ts, allow_unused=True)
    for g, r in zip(_as_float(second, inputs), _as_float(ref_second, inputs)):
        _close(g, r, "double backward")


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
