"""No Tensor argument is silently turned into a constant, in any op of any installed package.

An op's keyword-only params are constants (never differentiated). A Tensor that requires grad
given there would get no gradient, so every op must refuse it with a clear error; the same
value without grad (or under ``no_grad``) is accepted. Checked for every float param of every
example of every registered op, plugin ops included.
"""

import numpy as np
import pytest
import sadl
from sadl.testing import materialize

CASES = []
for name in sadl.ops.names():
    op = sadl.ops.get(name)
    for index, example in enumerate(op.examples):
        for param, value in example.params.items():
            is_float_array = isinstance(value, np.ndarray) and value.dtype.kind == "f"
            is_float = isinstance(value, float) and not isinstance(value, bool)
            if is_float_array or is_float:
                CASES.append((name, index, param))


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


def test_multi_head_attention_refuses_a_float_mask_that_requires_grad():
    attention = sadl.nn.MultiHeadAttention(8, 2)
    x = sadl.randn(1, 3, 8)
    bias = sadl.Tensor(np.zeros((3, 3), np.float32), requires_grad=True)
    with pytest.raises(TypeError, match=r"MultiHeadAttention.*mask= is a constant parameter"):
        attention(x, mask=bias)
    expected = attention(x, mask=np.zeros((3, 3), np.float32)).numpy()
    np.testing.assert_allclose(attention(x, mask=bias.detach()).numpy(), expected)
    with sadl.no_grad():
        np.testing.assert_allclose(attention(x, mask=bias).numpy(), expected)
