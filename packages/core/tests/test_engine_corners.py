"""Corners of the engine that outside suites found: dtypes, broadcast errors, pow."""

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch", reason="PyTorch is the reference here (a test dependency)")


@pytest.mark.parametrize(
    "make",
    [
        lambda: sadl.tensor(np.array([1, "a"], dtype=object)),
        lambda: sadl.tensor(np.array([1.0, 2.0], dtype=object)),
        lambda: sadl.Tensor(np.array([1, 2], dtype=object)),
        lambda: sadl.tensor([1.0, 2.0], dtype=object),
        lambda: sadl.Parameter(np.array([1.0], dtype=object)),
    ],
    ids=["mixed", "floats", "Tensor", "dtype-object", "Parameter"],
)
def test_object_arrays_are_refused_as_torch_does(make):
    with pytest.raises(TypeError, match="of dtype object: the values are not numeric"):
        make()


A, B = sadl.ones(2, 3), sadl.ones(4)
BROADCASTING = {
    "add": lambda: A + B,
    "subtract": lambda: A - B,
    "multiply": lambda: A * B,
    "divide": lambda: A / B,
    "power": lambda: A**B,
    "maximum": lambda: np.maximum(A, B),
    "minimum": lambda: np.minimum(A, B),
    "arctan2": lambda: np.arctan2(A, B),
    "where": lambda: sadl.ops.where(A > 0, A, B),
    "np.fmax": lambda: np.fmax(A, B),  # no op implements it: the dispatch fallback
    "np.copysign": lambda: np.copysign(A, B),  # an op of sadl-layers where it is installed
}


@pytest.mark.parametrize("name", list(BROADCASTING))
def test_broadcast_errors_name_the_op_and_the_shapes(name):
    bare = name.removeprefix("np.")
    labels = (f"op {bare!r}: ", f"np.{bare}: ")
    with pytest.raises(
        ValueError, match=r"input shapes .*\(2, 3\) and \(4,\) do not broadcast"
    ) as e:
        BROADCASTING[name]()
    assert str(e.value).startswith(labels)  # an op, or NumPy's function where no op serves it


def _grads(expression, *values):
    ours = [sadl.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in values]
    theirs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    expression(*ours).sum().backward()
    expression(*theirs).sum().backward()
    return [np.asarray(t.grad) for t in ours], [t.grad.numpy() for t in theirs]


@pytest.mark.parametrize(
    ("expression", "values"),
    [
        (lambda x, y: x**y, ([0.0, 0.0, 0.0, 0.0], [-1.0, -2.5, 0.0, 2.0])),  # d/dy 0**y
        (lambda x: 0.0**x, ([-2.0, -0.5, 0.0, 3.0],)),  # d/dx 0**x, a constant base
        (lambda x, y: x**y, ([np.inf, -np.inf, 0.0], [0.0, 0.0, 0.0])),  # d/dx x**0
        (lambda x, y: x**y, ([2.0, 0.5, 0.0], [-1.0, 0.0, 3.0])),  # ordinary points
    ],
    ids=[
        "zero-base-negative-exponent",
        "zero-constant-base",
        "infinite-base-zero-exponent",
        "plain",
    ],
)
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_power_gradients_at_zero_and_infinite_bases_match_torch(expression, values):
    ours, theirs = _grads(expression, *values)
    for mine, reference in zip(ours, theirs):
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(reference))
        np.testing.assert_allclose(mine, reference, rtol=1e-12)


INT = np.array([3, -7, 8], dtype=np.int32)
MIXED = {
    "div-trunc": lambda t: sadl.ops.div(t, 2.5, rounding_mode="trunc"),
    "div-floor": lambda t: sadl.ops.div(t, 2.5, rounding_mode="floor"),
    "true-divide": lambda t: t / 2,
    "multiply": lambda t: t * 1.5,
    "floor-divide": lambda t: t // 2.5,
    "divmod": lambda t: divmod(t, 2.5)[0],
    "np.divmod": lambda t: np.divmod(t, 2.5)[1],
    "np.copysign": lambda t: np.copysign(t, -1.5),
    "np.fmax": lambda t: np.fmax(t, 0.5),
    "np.heaviside": lambda t: np.heaviside(t, 0.5),
    "np.ldexp": lambda t: np.ldexp(1.5, t),
    "sqrt": lambda t: np.sqrt(t),
}


@pytest.mark.parametrize("name", list(MIXED))
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_an_int_tensor_with_a_python_float_gives_the_default_float_dtype(name):
    assert MIXED[name](sadl.tensor(INT)).dtype == np.float32
    before = sadl.get_default_dtype()
    sadl.set_default_dtype(np.float64)
    try:
        assert MIXED[name](sadl.tensor(INT)).dtype == np.float64
    finally:
        sadl.set_default_dtype(before)


def test_float_operands_and_float_power_keep_their_dtype():
    t = sadl.tensor(INT)
    assert np.fmax(t, np.array([0.5])).dtype == np.float64  # a float64 array decides
    assert np.float_power(t, 2).dtype == np.float64  # float64 by definition, as torch's


def test_bitwise_ops_take_the_bit_pattern_of_an_int_the_dtype_cannot_hold():
    t = sadl.tensor(INT)
    ref = torch.tensor(INT)
    for ours, theirs in [
        (t | 0xFFFFFFFF, ref | 0xFFFFFFFF),
        (t & 0xFFFFFFFF, ref & 0xFFFFFFFF),
        (0xFFFFFFFF ^ t, 0xFFFFFFFF ^ ref),
        (t | 0x80000000, ref | 0x80000000),
    ]:
        assert ours.dtype == np.int32
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    # Beyond the dtype's bits, and in arithmetic, NumPy's OverflowError stands (torch wraps
    # silently there; sadl never computes a silently different number).
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        t | 2**40
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        t + 0xFFFFFFFF
