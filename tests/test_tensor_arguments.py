"""No Tensor argument is silently turned into a constant, in any op of any installed package.

An op's keyword-only params are constants (never differentiated). A Tensor that requires grad
given there would get no gradient, so every op must refuse it with a clear error; the same
value without grad (or under ``no_grad``) is accepted. A keyword that names one of the op's
inputs (``mask=`` of attention, ``a_min=`` of clip) is that input, and gets its gradient.
Checked for every float param of every example of every registered op, plugin ops included.
"""

import numpy as np
import pytest
import sadl
from sadl.testing import materialize

CASES, INPUTS_BY_NAME = [], []
for name in sadl.ops.names():
    op = sadl.ops.get(name)
    for index, example in enumerate(op.examples):
        for param, value in example.params.items():
            is_float_array = isinstance(value, np.ndarray) and value.dtype.kind == "f"
            is_float = isinstance(value, float) and not isinstance(value, bool)
            if is_float_array or is_float:
                by_name = []  # the inputs given by keyword: the ones right after the inputs
                for input_name in op.input_names[len(example.inputs) :]:
                    if input_name not in example.params:
                        break
                    by_name.append(input_name)
                (INPUTS_BY_NAME if param in by_name else CASES).append((name, index, param))


def test_there_are_float_params_to_check():
    assert len(CASES) >= 10, CASES


@pytest.mark.parametrize(("name", "index", "param"), CASES, ids=lambda v: str(v))
def test_a_float_param_that_requires_grad_is_refused_never_detached(name, index, param):
    op = sadl.ops.get(name)
    inputs, params = materialize(op.examples[index], np.random.default_rng(0))
    tensors = [
        sadl.Tensor(x, requires_grad=True)
        if isinstance(x, np.ndarray) and x.dtype.kind == "f"
        else x
        for x in inputs
    ]
    value = np.asarray(params[param], dtype=np.float64)
    with pytest.raises(TypeError, match=rf"{param}= is a constant parameter.*requires grad"):
        op(*tensors, **{**params, param: sadl.Tensor(value, requires_grad=True)})
    op(*tensors, **{**params, param: sadl.Tensor(value)})  # a constant, said so, is fine


@pytest.mark.parametrize(("name", "index", "param"), INPUTS_BY_NAME, ids=lambda v: str(v))
def test_a_float_input_given_by_keyword_gets_its_gradient(name, index, param):
    op = sadl.ops.get(name)
    inputs, params = materialize(op.examples[index], np.random.default_rng(0))
    value = sadl.Tensor(np.asarray(params.pop(param), dtype=np.float64), requires_grad=True)
    by_keyword = op(*inputs, **params, **{param: value})
    np.sum(by_keyword * by_keyword).backward()
    assert value.grad is not None and value.grad.shape == value.shape
    constant = op(*inputs, **params, **{param: value.detach()})
    np.testing.assert_allclose(by_keyword.numpy(), constant.numpy())


def test_there_are_inputs_given_by_keyword_to_check():
    assert {name for name, _, _ in INPUTS_BY_NAME} >= {"clip", "scaled_dot_product_attention"}


def test_multi_head_attention_learns_a_float_mask_that_requires_grad():
    attention = sadl.nn.MultiHeadAttention(8, 2)
    x = sadl.randn(1, 3, 8)
    bias = sadl.Tensor(np.zeros((3, 3), np.float32), requires_grad=True)
    attention(x, mask=bias).sum().backward()
    assert bias.grad is not None and bias.grad.shape == (3, 3)
    expected = attention(x, mask=np.zeros((3, 3), np.float32)).numpy()
    np.testing.assert_allclose(attention(x, mask=bias.detach()).numpy(), expected)
    with sadl.no_grad():
        np.testing.assert_allclose(attention(x, mask=bias).numpy(), expected)
