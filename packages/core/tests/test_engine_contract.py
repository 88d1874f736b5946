"""What the engine checks so that no gradient is silently wrong.

* Every gradient a backward rule returns is checked against its input: an array of the input's
  backend, floating, with the input's shape or one that broadcasting the input produced (summed
  back), never broadcast up from a lower rank or a scalar; anything else is an error naming the
  op and the input.
* Tensors given where an op takes a constant (a param) are refused when they require grad; a
  keyword naming an input is that input (sadl-layers' tests do the same with ``clip``, ``take``,
  ``prod``, ``var`` and ``std``).
* ``requires_grad`` is validated on assignment, as ``requires_grad_()`` is.
* Axes: negative axes in ``permute``, ``axis=-1`` on 0-d tensors, empty reductions.
* Promotion: integer tensors with Python floats give the default dtype, as in torch.
"""

import warnings

import numpy as np
import pytest
import sadl
from sadl.plugins import OpDef
from sadl.testing import gradcheck


def T(a, grad=True):
    return sadl.Tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def run_rule(rule, shape=(3,), per_input=True):
    op = OpDef("probe", lambda x: x * 2, (rule,) if per_input else rule)
    x = T(np.ones(shape))
    op(x).sum().backward()
    return x.grad


# ---------------------------------------------------------------- the rule's gradient, checked
@pytest.mark.parametrize(
    ("rule", "what"),
    [
        (lambda g, out, x: np.float64(2.0), "shape ()"),  # a NumPy scalar
        (lambda g, out, x: 2.0, "float"),  # a Python number
        (lambda g, out, x: g[0], "shape ()"),  # lower rank, would broadcast up
        (lambda g, out, x: g[:1], "shape (1,)"),  # size 1, would broadcast up
        (lambda g, out, x: np.ones((3, 2)), "shape (3, 2)"),  # neither shape nor broadcast
        (lambda g, out, x: [g], "list"),
        (lambda g, out, x: np.ones(3, dtype=np.int64), "int64"),
        (lambda g, out, x: np.ones(3, dtype=bool), "bool"),
    ],
    ids=["np-scalar", "number", "lower-rank", "size-1", "wrong-shape", "list", "int", "bool"],
)
def test_a_bad_gradient_is_an_error_naming_the_op_and_the_input(rule, what):
    with pytest.raises(RuntimeError) as caught:
        run_rule(rule)
    message = str(caught.value)
    assert "op 'probe'" in message and "input 0" in message and what in message, message


@pytest.mark.parametrize(
    "rule",
    [lambda g, out, x: [2 * g], lambda g, out, x: 2 * g, lambda g, out, x: (2 * g, None)],
    ids=["list", "bare-array", "too-many"],
)
def test_a_single_rule_must_return_one_gradient_per_input_in_a_tuple(rule):
    with pytest.raises(RuntimeError, match="backward rule of op 'probe' must return a tuple"):
        run_rule(rule, per_input=False)


def test_a_gradient_with_the_broadcast_output_shape_is_summed_back():
    op = OpDef("bcast", lambda x, y: x + y, (lambda g, out, x, y: g, lambda g, out, x, y: g))
    x, y = T(np.ones((2, 1, 3))), T(np.ones((4, 1)))
    op(x, y).sum().backward()
    np.testing.assert_allclose(x.grad, np.full((2, 1, 3), 4.0))
    np.testing.assert_allclose(y.grad, np.full((4, 1), 6.0))


def test_a_float_gradient_is_cast_to_the_input_dtype():
    op = OpDef("cast", lambda x: x * 2, (lambda g, out, x: (2 * g).astype(np.float64),))
    x = sadl.Tensor(np.ones(3, np.float32), requires_grad=True)
    op(x).sum().backward()
    assert x.grad.dtype == np.float32


def test_a_gradient_from_another_backend_is_refused():
    class NotAnArray:
        shape = (3,)
        dtype = np.dtype(np.float64)

    with pytest.raises(RuntimeError, match="op 'probe' returned NotAnArray.*input 0"):
        run_rule(lambda g, out, x: NotAnArray())


def test_the_error_names_the_failing_input_of_a_two_input_op():
    op = OpDef(
        "pair",
        lambda x, y: x * y,
        (lambda g, out, x, y: g * y, lambda g, out, x, y: np.sum(g)),
    )
    x, y = T(np.ones(3)), T(np.ones(3))
    with pytest.raises(RuntimeError, match="op 'pair'.*input 1"):
        op(x, y).sum().backward()


# ---------------------------------------------------------------- permute with negative axes
@pytest.mark.parametrize("axes", [(-1, 0, 1), (2, -3, -2), (-1, -2, -3), (1, -1, 0)])
def test_permute_with_negative_axes_has_the_right_gradient(axes):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4))
    expected = np.transpose(x, axes)
    t = T(x)
    out = t.permute(*axes)
    np.testing.assert_array_equal(out.numpy(), expected)
    gradcheck(lambda a: a.permute(*axes) * np.arange(24.0).reshape(expected.shape), x)
    gradcheck(lambda a: a.transpose(axes), x)
    gradcheck(lambda a: np.transpose(a, axes), x)  # the op itself, through NumPy
    gradcheck(lambda a: sadl.ops.transpose(a, axes=axes), x)


# ---------------------------------------------------------------- Tensor arguments
@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: sadl.ops.full_like(x, fill_value=w),
        lambda x, w: np.full_like(x, fill_value=w),
    ],
    ids=["fill-value", "numpy-keyword"],
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
        lambda x, w: sadl.ops.sum(x, axis=(w,)),
        lambda x, w: np.mean(x, axis=[w]),
    ],
    ids=["tuple-param", "numpy-list-param"],
)
def test_a_float_tensor_that_requires_grad_is_refused_as_indices(call):
    with pytest.raises(TypeError, match=r"constant parameter.*requires grad"):
        call(T([0.0, 1.0]), T([0.0]))


# ---------------------------------------------------------------- requires_grad
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.uint8])
def test_assigning_requires_grad_on_a_non_float_tensor_is_refused(dtype):
    t = sadl.tensor(np.array([1, 0, 1], dtype=dtype))
    with pytest.raises(TypeError, match="only floating-point tensors can require grad"):
        t.requires_grad = True
    with pytest.raises(TypeError, match="only floating-point"):
        t.requires_grad_()
    with pytest.raises(TypeError, match="only floating-point"):
        sadl.Tensor(np.array([1, 2], dtype=dtype), requires_grad=True)
    assert not t.requires_grad


def test_requires_grad_assignment_works_on_float_leaves_and_refuses_non_leaves():
    t = sadl.tensor([1.0, 2.0])
    t.requires_grad = True
    (t * t).sum().backward()
    np.testing.assert_allclose(t.grad, [2.0, 4.0])
    y = t * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    t.requires_grad = False
    assert not (t * 2).requires_grad
    p = sadl.Parameter(np.zeros(2, np.float32))
    p.requires_grad = False  # freezing a Parameter, through the same check
    assert not p.requires_grad and not (p * 2).requires_grad
    with pytest.raises(TypeError, match="True or False"):
        p.requires_grad = "yes"
    frozen_int = sadl.tensor([1, 2])
    with pytest.raises(TypeError, match="only floating-point"):
        frozen_int.requires_grad = True
    with pytest.raises(TypeError, match="True or False"):
        t.requires_grad = "yes"  # torch refuses a non-bool too; a truthy string is no answer
    with pytest.raises(TypeError, match="True or False"):
        t.requires_grad_(1)


# ---------------------------------------------------------------- axes, empty, dtype
@pytest.mark.parametrize("method", ["sum", "max", "min", "amax", "amin", "logsumexp"])
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_reductions_of_a_0d_tensor_over_its_implicit_axis_differentiate(method, axis):
    # NumPy's ufunc reductions accept axis 0 / -1 on a 0-d array; so do forward and backward.
    x = T(1.5)
    out = getattr(x, method)(axis=axis)
    assert out.shape == ()
    out.backward()
    assert x.grad.shape == () and np.isfinite(x.grad)
    gradcheck(lambda t: getattr(t, method)(axis=axis, keepdims=True), np.array(0.7))
    with pytest.raises(np.exceptions.AxisError):
        getattr(x, method)(axis=1)


@pytest.mark.parametrize("method", ["mean"])
def test_reductions_numpy_refuses_on_a_0d_tensor_fail_in_the_forward(method):
    x = T(1.5)
    with pytest.raises(np.exceptions.AxisError):
        getattr(x, method)(axis=-1)  # as np.mean(np.float64(1.5), axis=-1): never in backward
    getattr(x, method)().backward()


@pytest.mark.parametrize("method", ["sum", "mean", "norm"])
def test_reductions_over_an_empty_axis_backpropagate(method):
    x = T(np.zeros((0, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "mean of empty slice"
        out = getattr(x, method)(axis=0)
        reference = {"norm": np.linalg.norm}
        expected = reference.get(method, getattr(np, method, None))(x.numpy(), axis=0)
        np.testing.assert_array_equal(out.numpy(), expected)
        out.sum().backward()
    assert x.grad.shape == (0, 3)


@pytest.mark.parametrize(
    "compute",
    [
        lambda t: t * 1.5,
        lambda t: 1.5 + t,
        lambda t: t / 2,
        lambda t: t**0.5,
        lambda t: np.sqrt(t),
        lambda t: t.exp(),
        lambda t: t.mean(),
        lambda t: np.maximum(t, 0.5),
    ],
    ids=["mul", "radd", "truediv", "pow", "np.sqrt", "exp", "mean", "maximum"],
)
def test_integer_tensors_with_python_floats_give_the_default_dtype(compute):
    t = sadl.tensor([1, 2, 3])
    assert compute(t).dtype == sadl.get_default_dtype() == np.float32
    sadl.set_default_dtype(np.float64)
    try:
        assert compute(t).dtype == np.float64
    finally:
        sadl.set_default_dtype(np.float32)


def test_float_inputs_and_explicit_dtypes_keep_their_dtype():
    t = sadl.tensor([1, 2, 3])
    assert (t * np.float64(1.5)).dtype == np.float64  # a NumPy float decides, as in NumPy
    assert (t * sadl.tensor(np.ones(3))).dtype == np.float64
    assert t.astype(np.float64).dtype == np.float64
    assert (sadl.tensor(np.ones(3, np.float16)) * 1.5).dtype == np.float16
    assert (t * 2).dtype == np.int64 and (t // 2).dtype == np.int64


def test_a_keyword_naming_an_input_is_that_input_as_in_torch():
    c, x, y = np.array([True, False]), T([1.0, 2.0]), T([3.0, 4.0])
    sadl.ops.where(c, x, y=y).sum().backward()  # as sadl.ops.where(c, x, y)
    np.testing.assert_array_equal(y.grad, [0.0, 1.0])
    np.testing.assert_array_equal(x.grad, [1.0, 0.0])
