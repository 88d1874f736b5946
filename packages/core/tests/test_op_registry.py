"""Every registered op passes the conformance battery: this is the registry-wide gradient check.

A new op without examples fails here ("the op has no examples"), so no op can join the registry
without a float64 gradcheck and gradgradcheck spec.
"""

import numpy as np
import pytest
import sadl
from sadl._builtin import CORE_OPS
from sadl.testing import check_op

CORE_NAMES = sorted(op.name for op in CORE_OPS)


@pytest.mark.parametrize("name", CORE_NAMES)
def test_core_op_conformance(name):
    op = sadl.ops.get(name)
    report = check_op(op, raise_exception=False)
    assert report.results, f"{name}: nothing was checked"
    assert report.ok, str(report)


def test_core_has_at_least_70_differentiable_ops():
    differentiable = [op for op in CORE_OPS if op.differentiable]
    assert len(differentiable) >= 70


REQUIRED = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "true_divide",
    "power",
    "negative",
    "positive",
    "absolute",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "square",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "arctanh",
    "maximum",
    "minimum",
    "where",
    "matmul",
    "dot",
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "cumsum",
    "reshape",
    "transpose",
    "swapaxes",
    "moveaxis",
    "squeeze",
    "expand_dims",
    "broadcast_to",
    "concatenate",
    "stack",
    "split",
    "flip",
    "getitem",
    "astype",
    "copy",
    "sigmoid",
    "relu",
    "softmax",
    "log_softmax",
]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_op_is_registered_and_differentiable(name):
    assert sadl.ops.get(name).differentiable


@pytest.mark.parametrize(
    "name", ["sign", "floor", "ceil", "trunc", "rint", "round", "floor_divide"]
)
def test_piecewise_constant_ops_have_a_zero_gradient_as_in_torch(name):
    x = sadl.Tensor(np.array([[0.5, -1.5], [2.5, 0.3]]), requires_grad=True)
    op = sadl.ops.get(name)
    out = op(x, x + 1.0) if name == "floor_divide" else op(x)
    assert out.requires_grad
    out.sum().backward()
    np.testing.assert_array_equal(x.grad, np.zeros((2, 2)))


@pytest.mark.parametrize("name", ["argmax", "argmin", "greater", "less", "equal", "isnan"])
def test_nondifferentiable_ops_return_tensors_without_grad(name):
    x = sadl.Tensor(np.array([[0.5, -1.5], [2.5, 0.0]]), requires_grad=True)
    op = sadl.ops.get(name)
    out = op(x, x) if op.forward.__class__ is np.ufunc and op.forward.nin == 2 else op(x)
    assert isinstance(out, sadl.Tensor)
    assert not out.requires_grad


def test_every_example_runs_in_float32_and_keeps_float32_gradients():
    # check_op already covers it per op; this guards the float32 path of the hot arithmetic ops.
    x = sadl.Tensor(np.ones((3, 4), np.float32), requires_grad=True)
    y = ((x * 1.5 + 2.0) / 3.0 - x**2).tanh().sum()
    y.backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


def test_op_without_examples_fails_the_battery():
    op = sadl.plugins.OpDef("lonely", lambda x: x * 2, (lambda g, out, x: 2 * g,))
    report = check_op(op, raise_exception=False)
    assert not report.ok
    assert "no examples" in report.failures()[0].message
