"""What the engine checks, seen through ``clip``, ``take``, ``prod``, ``var``, ``std`` and ``sort``:
``clip`` differentiates its tensor bounds and follows NumPy where they cross; a Tensor that
requires grad given for a constant (``clip``'s keyword bound, ``take``'s indices) is refused; a
keyword naming an input is that input; ``prod``, ``var`` and ``std`` on 0-d tensors and empty
or dof-less axes answer as NumPy and torch do. Also: the Tensor methods that call these ops,
their NumPy spellings, and ``sort``'s torch parity; the predicates (``isneginf``, ``isposinf``,
``signbit``, ``isclose``, ``count_nonzero``) as ops and NumPy functions, against torch.
"""

import warnings

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

OPS = ["prod", "var", "std", "cumprod", "sort", "take", "take_along_axis", "clip"]
PREDICATES = ["isneginf", "isposinf", "signbit", "isclose", "count_nonzero"]


def T(a, grad=True):
    return sadl.Tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


@pytest.mark.parametrize("name", OPS)
def test_the_op_is_registered_and_differentiable(name):
    assert sadl.ops.get(name).differentiable


def test_clip_with_tensor_bounds_differentiates_the_bounds():
    x = T([0.0, 1.0, 2.0, 3.0])
    lo = T([0.5, 0.5, 0.5, 0.5])
    hi = T([2.5, 2.5, 1.5, 2.5])
    x.clip(lo, hi).sum().backward()
    np.testing.assert_array_equal(lo.grad, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(hi.grad, [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 0.0, 0.0])
    rng = np.random.default_rng(1)
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=(4,)) - 1, rng.normal(size=(3, 1)) + 1
    gradcheck(lambda x, lo, hi: x.clip(lo, hi), a, b, c)
    gradgradcheck(lambda x, lo, hi: np.clip(x, lo, hi) ** 2, a, b, c)
    gradcheck(lambda x, lo: x.clamp(min=lo), a, b)


def test_clip_with_crossed_bounds_follows_numpy():
    x, lo, hi = T([0.0, 5.0]), T([2.0, 2.0]), T([1.0, 1.0])  # lo > hi: NumPy gives hi
    out = x.clip(lo, hi)
    np.testing.assert_array_equal(out.numpy(), [1.0, 1.0])
    out.sum().backward()
    np.testing.assert_array_equal(hi.grad, [1.0, 1.0])
    np.testing.assert_array_equal(lo.grad, [0.0, 0.0])
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


def test_np_clip_keyword_bound_reaches_the_op():
    x = T([0.0, 3.0])
    np.testing.assert_array_equal(np.clip(x, a_max=1.0).numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(np.clip(x, None, 1.0).numpy(), [0.0, 1.0])


@pytest.mark.parametrize("method", ["var", "std"])
@pytest.mark.parametrize(("shape", "axis", "ddof"), [((2,), None, 2), ((3,), 0, 5), ((1,), 0, 1)])
def test_var_and_std_with_no_degrees_of_freedom_answer_like_numpy_and_torch(
    method, shape, axis, ddof
):
    x = T(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape))
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        expected = getattr(np, method)(x.numpy(), axis=axis, ddof=ddof)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        out = getattr(x, method)(axis=axis, ddof=ddof)
    np.testing.assert_array_equal(out.numpy(), expected)
    with np.errstate(all="ignore"):
        out.sum().backward()  # no ZeroDivisionError: inf or nan, as torch gives
    assert x.grad.shape == x.shape and not np.isfinite(x.grad).all()


def test_a_keyword_naming_an_input_is_that_input_as_in_torch():
    x, lo, hi = T([0.0, 1.0]), T(0.5), T(0.75)
    sadl.ops.clip(x, a_min=lo).sum().backward()  # as sadl.ops.clip(x, lo)
    assert lo.grad == 1.0
    # After a gap (a_min not given) it cannot be placed: a constant, so one that requires
    # grad is refused, saying how to get its gradient.
    with pytest.raises(TypeError, match="op 'clip': a_max=.*input 3: pass it positionally"):
        sadl.ops.clip(x, a_max=hi)
    sadl.ops.clip(x, None, hi).sum().backward()
    assert hi.grad == 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: sadl.ops.clip(x, min=w),
        lambda x, w: np.clip(x, min=w),
        lambda x, w: sadl.ops.clip(x, max=(w, 1.0)[0]),
    ],
    ids=["op-param", "numpy-keyword", "op-max"],
)
def test_a_tensor_that_requires_grad_given_as_a_constant_param_is_refused(call):
    x, w = T([0.0, 1.0]), T(0.5)
    with pytest.raises(TypeError, match=r"constant parameter.*requires grad.*detach"):
        call(x, w)
    call(x, w.detach())  # a constant meant as such is fine
    with sadl.no_grad():
        call(x, w)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: sadl.ops.take(x, indices=w),
        lambda x, w: sadl.ops.take(x, w),
        lambda x, w: sadl.ops.take_along_axis(x, w, 0),
        lambda x, w: x.take(w),
        lambda x, w: x.take_along_axis(w, 0),
        lambda x, w: np.take(x, w),
    ],
    ids=["op-indices", "op-positional", "op-along-axis", "method-indices", "along-axis", "np.take"],
)
def test_a_float_tensor_that_requires_grad_is_refused_as_indices(call):
    with pytest.raises(TypeError, match=r"constant parameter.*requires grad"):
        call(T([0.0, 1.0]), T([0.0]))


@pytest.mark.parametrize("axis", [-1, 0, None])
def test_prod_of_a_0d_tensor_over_its_implicit_axis_differentiates(axis):
    x = T(1.5)
    out = x.prod(axis=axis)
    assert out.shape == ()
    out.backward()
    assert x.grad.shape == () and np.isfinite(x.grad)
    gradcheck(lambda t: t.prod(axis=axis, keepdims=True), np.array(0.7))
    with pytest.raises(np.exceptions.AxisError):
        x.prod(axis=1)


@pytest.mark.parametrize("method", ["var", "std"])
def test_var_and_std_of_a_0d_tensor_fail_in_the_forward_as_numpy_does(method):
    x = T(1.5)
    with pytest.raises(np.exceptions.AxisError):
        getattr(x, method)(axis=-1)  # as np.var(np.float64(1.5), axis=-1): never in backward
    getattr(x, method)().backward()


@pytest.mark.parametrize("method", ["var", "std", "prod"])
def test_reductions_over_an_empty_axis_backpropagate(method):
    x = T(np.zeros((0, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "mean of empty slice"
        out = getattr(x, method)(axis=0)
        np.testing.assert_array_equal(out.numpy(), getattr(np, method)(x.numpy(), axis=0))
        out.sum().backward()
    assert x.grad.shape == (0, 3)


def test_var_defaults_to_numpy_ddof_zero():
    x = np.arange(1.0, 13.0).reshape(3, 4) / 13.0
    t = sadl.Tensor(x)
    np.testing.assert_allclose(t.var().item(), x.var())
    np.testing.assert_allclose(t.var(ddof=1).item(), x.var(ddof=1))


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("prod", ()),
        ("cumprod", (1,)),
        ("var", ()),
        ("std", ()),
        ("sort", ()),
        ("take", (np.array([0, 3]),)),
        ("take_along_axis", (np.zeros((3, 1), dtype=np.int64), 1)),
        ("clip", (0.2, 0.6)),
    ],
)
def test_every_method_is_reachable_through_numpy(name, args):
    t = T(np.arange(1.0, 13.0).reshape(3, 4) / 13.0)
    via_method, via_numpy = getattr(t, name)(*args), getattr(np, name)(t, *args)
    assert isinstance(via_numpy, sadl.Tensor) and via_numpy.requires_grad
    np.testing.assert_allclose(via_numpy.numpy(), via_method.numpy())


def test_ufunc_reduce_and_accumulate_of_multiply_reach_prod_and_cumprod():
    x = np.random.default_rng(0).uniform(0.5, 1.5, size=(3, 4))
    t = T(x)
    np.testing.assert_allclose(np.multiply.reduce(t, axis=1).numpy(), np.prod(x, axis=1))
    np.testing.assert_allclose(np.multiply.accumulate(t, axis=0).numpy(), np.cumprod(x, axis=0))
    gradcheck(lambda a: np.multiply.reduce(a, axis=0), x)
    gradcheck(lambda a: np.multiply.accumulate(a, axis=1), x)


@pytest.mark.parametrize("dim", [0, 1])
def test_sort_descending_and_argsort_match_torch(dim):
    x = np.random.default_rng(dim).permutation(20).reshape(4, 5) / 7 - 1  # no ties
    ours, theirs = T(x), torch.tensor(x, requires_grad=True)
    out, indices = ours.sort(dim=dim, descending=True)  # torch's (values, indices) for dim=
    ref, ref_indices = theirs.sort(dim=dim, descending=True)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), ref_indices.numpy())
    np.testing.assert_array_equal(ours.sort(dim, True).numpy(), out.numpy())  # NumPy's: values
    w = np.random.default_rng(9).normal(size=x.shape)
    (out * w).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy())
    gradgradcheck(lambda a: a.sort(dim=dim, descending=True).values ** 2, x)
    ties = np.array([[2.0, 1.0, 2.0, np.nan, 1.0]])
    mine = sadl.tensor(ties).argsort(dim=1, descending=True).numpy()
    ref = torch.tensor(ties).argsort(dim=1, descending=True, stable=True).numpy()
    np.testing.assert_array_equal(mine, ref)
    ours_sorted = np.sort(sadl.tensor(ties), axis=1)  # NumPy's spelling still works
    np.testing.assert_array_equal(ours_sorted.numpy(), np.sort(ties, axis=1))


@pytest.mark.parametrize("name", PREDICATES)
def test_the_predicate_is_registered_without_a_gradient(name):
    assert not sadl.ops.get(name).differentiable


@pytest.mark.parametrize("name", ["isneginf", "isposinf", "signbit"])
def test_infinity_and_sign_tests_match_torch_as_ops_and_numpy_functions(name):
    values = np.array([-np.inf, -1.0, -0.0, 0.0, np.inf, np.nan, 3.0])
    want = getattr(torch, name)(torch.tensor(values)).numpy()
    x = sadl.tensor(values, requires_grad=True)
    for got in (getattr(sadl.ops, name)(x), getattr(np, name)(x)):
        assert got.dtype == np.bool_ and not got.requires_grad
        np.testing.assert_array_equal(got.numpy(), want)


def test_isclose_and_count_nonzero_match_torch():
    a = np.array([[1.0, 2.0, 0.0], [0.0, 1e-9, 3.0]])
    b = np.array([1.0, 2.0 + 1e-6, 1e-9])
    x, y = T(a), T(b)
    want = torch.isclose(torch.tensor(a), torch.tensor(b), rtol=1e-5, atol=1e-8).numpy()
    for got in (sadl.ops.isclose(x, y), np.isclose(x, y)):
        assert not got.requires_grad
        np.testing.assert_array_equal(got.numpy(), want)
    for axis in (None, 0, 1):
        want = torch.count_nonzero(torch.tensor(a), dim=axis).numpy()
        np.testing.assert_array_equal(np.count_nonzero(x, axis=axis).numpy(), want)
    kept = sadl.ops.count_nonzero(x, axis=1, keepdims=True)
    np.testing.assert_array_equal(kept.numpy(), np.count_nonzero(a, axis=1, keepdims=True))


@pytest.mark.parametrize(
    ("name", "indices", "axis"),
    [
        ("take", np.array([0, 5, 5, 11]), None),
        ("take", np.array([[1, 1], [0, 3]]), 1),
        ("take_along_axis", np.array([[0, 0], [3, 1], [2, 2]]), 1),
        ("take_along_axis", np.array([[0, 1, 2, 2]]), 0),
    ],
)
def test_take_ops_accept_indices_and_axis_by_position_as_numpy_and_torch(name, indices, axis):
    x = np.arange(1.0, 13.0).reshape(3, 4) / 13.0
    op = getattr(sadl.ops, name)
    args = (indices,) if axis is None and name == "take" else (indices, axis)
    outs = []
    for call in (lambda t: op(t, *args), lambda t: op(t, indices=indices, axis=axis)):
        t = T(x)
        out = call(t)
        (out * out).sum().backward()
        outs.append((out.numpy(), t.grad))
    (by_position, grad), (by_name, grad_by_name) = outs
    np.testing.assert_array_equal(by_position, getattr(np, name)(x, *args))
    np.testing.assert_array_equal(by_position, by_name)
    np.testing.assert_array_equal(grad, grad_by_name)
    ref = torch.tensor(x, requires_grad=True)
    index = torch.tensor(indices)
    picked = torch.take(ref, index) if axis is None else None
    if name == "take_along_axis":
        picked = torch.take_along_dim(ref, index, axis)
    if picked is not None:
        (picked * picked).sum().backward()
        np.testing.assert_allclose(by_position, picked.detach().numpy())
        np.testing.assert_allclose(grad, ref.grad.numpy())
    gradcheck(lambda t: op(t, *args), x)


def test_take_ops_name_their_params_when_given_too_many_or_twice():
    x, idx = T(np.zeros((2, 3))), np.array([[0], [2]])
    with pytest.raises(
        TypeError,
        match=r"take_along_axis: takes 3 positional arguments.*"
        r"indices, axis.*got 4",
    ):
        sadl.ops.take_along_axis(x, idx, 1, 0)
    with pytest.raises(TypeError, match=r"take: got multiple values for argument 'axis'"):
        sadl.ops.take(x, np.array([0]), 1, axis=0)
    np.testing.assert_array_equal(sadl.ops.take(x.numpy(), np.array([1]), 1), np.zeros((2, 1)))
