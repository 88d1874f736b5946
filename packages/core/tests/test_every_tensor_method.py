"""Every public Tensor method and every Python operator runs with sadl-core alone.

The cases below cover ``dir(sadl.Tensor)`` exactly (a new method needs its case): each gives
NumPy's values, and, where it is differentiable, float64 central differences agree with its
gradient. Nothing here needs a plugin package; nox runs this file with sadl-core alone.
"""

import math
import operator
import os
import subprocess
import sys

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck

rng = np.random.default_rng(0)
A = rng.uniform(0.2, 0.9, (3, 4))  # in every method's domain (log, arcsin, arctanh, erfinv)
B = rng.uniform(0.2, 0.9, (4, 3))
C = rng.uniform(0.2, 0.9, (3, 4))
INDEX = np.array([[0, 2, 1, 0], [2, 1, 0, 1]])
MASK = A > 0.5
_erf = np.vectorize(math.erf)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _in_place(name, *args):
    """The in-place method ``name`` run on a copy, which it returns."""

    def run(t):
        out = t.detach().copy() if isinstance(t, sadl.Tensor) else t.copy()
        result = getattr(out, name)(*args)
        assert result is out
        return out

    return run


# name -> (call on a Tensor, the same on a NumPy array, differentiable)
METHODS = {
    **{
        name: (lambda t, n=name: getattr(t, n)(), getattr(np, ref or name), True)
        for name, ref in [
            ("abs", None),
            ("absolute", None),
            ("arccos", None),
            ("arcsin", None),
            ("arctan", None),
            ("arctanh", None),
            ("cos", None),
            ("cosh", None),
            ("exp", None),
            ("exp2", None),
            ("expm1", None),
            ("log", None),
            ("log10", None),
            ("log1p", None),
            ("log2", None),
            ("negative", None),
            ("reciprocal", None),
            ("sin", None),
            ("sinh", None),
            ("sqrt", None),
            ("square", None),
            ("tan", None),
            ("tanh", None),
            ("ceil", None),
            ("floor", None),
            ("round", None),
            ("sign", None),
            ("trunc", None),
            ("ravel", None),
            ("copy", None),
            ("clone", "copy"),
            ("transpose", None),
            ("flatten", "ravel"),
            ("sum", None),
            ("mean", None),
            ("max", None),
            ("min", None),
            ("amax", None),
            ("amin", None),
            ("prod", None),
            ("var", None),
            ("std", None),
            ("tril", None),
            ("triu", None),
            ("diagonal", None),
            ("trace", None),
            ("sort", None),
        ]
    },
    "norm": (lambda t: t.norm(), np.linalg.norm, True),
    "isfinite": (lambda t: t.isfinite(), np.isfinite, False),
    "isnan": (lambda t: t.isnan(), np.isnan, False),
    "erf": (lambda t: t.erf(), _erf, True),
    "erfc": (lambda t: t.erfc(), lambda a: 1 - _erf(a), True),
    "erfinv": (lambda t: t.erfinv().erf(), lambda a: a, True),
    "rsqrt": (lambda t: t.rsqrt(), lambda a: 1 / np.sqrt(a), True),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0), True),
    "sigmoid": (lambda t: t.sigmoid(), _sigmoid, True),
    "softplus": (lambda t: t.softplus(), lambda a: np.log1p(np.exp(a)), True),
    "softmax": (lambda t: t.softmax(-1), _softmax, True),
    "log_softmax": (lambda t: t.log_softmax(-1), lambda a: np.log(_softmax(a)), True),
    "logsumexp": (lambda t: t.logsumexp(1), lambda a: np.log(np.exp(a).sum(1)), True),
    "clip": (lambda t: t.clip(0.3, 0.6), lambda a: np.clip(a, 0.3, 0.6), True),
    "clamp": (lambda t: t.clamp(0.3, 0.6), lambda a: np.clip(a, 0.3, 0.6), True),
    "cumsum": (lambda t: t.cumsum(1), lambda a: np.cumsum(a, 1), True),
    "cumprod": (lambda t: t.cumprod(1), lambda a: np.cumprod(a, 1), True),
    "cummax": (lambda t: t.cummax(1).values, lambda a: np.maximum.accumulate(a, 1), True),
    "cummin": (lambda t: t.cummin(1).values, lambda a: np.minimum.accumulate(a, 1), True),
    "topk": (lambda t: t.topk(2).values, lambda a: -np.sort(-a, 1)[:, :2], True),
    "argmax": (lambda t: t.argmax(1), lambda a: a.argmax(1), False),
    "argmin": (lambda t: t.argmin(1), lambda a: a.argmin(1), False),
    "argsort": (lambda t: t.argsort(1), lambda a: a.argsort(1), False),
    "all": (lambda t: (t > 0.5).all(1), lambda a: (a > 0.5).all(1), False),
    "any": (lambda t: (t > 0.5).any(1), lambda a: (a > 0.5).any(1), False),
    "count_nonzero": (lambda t: (t > 0.5).count_nonzero(1), lambda a: (a > 0.5).sum(1), False),
    "nonzero": (lambda t: (t > 0.5).nonzero()[1], lambda a: (a > 0.5).nonzero()[1], False),
    "argwhere": (lambda t: (t > 0.5).argwhere(), lambda a: np.argwhere(a > 0.5), False),
    "reshape": (lambda t: t.reshape(4, 3), lambda a: a.reshape(4, 3), True),
    "view": (lambda t: t.view(2, 6), lambda a: a.reshape(2, 6), True),
    "view_as": (lambda t: t.view_as(np.zeros(12)), np.ravel, True),
    "permute": (lambda t: t.permute(1, 0), lambda a: a.transpose(1, 0), True),
    "swapaxes": (lambda t: t.swapaxes(0, 1), lambda a: a.swapaxes(0, 1), True),
    "moveaxis": (lambda t: t.moveaxis(0, 1), lambda a: np.moveaxis(a, 0, 1), True),
    "T": (lambda t: t.T, lambda a: a.T, True),
    "mT": (lambda t: t.mT, lambda a: a.swapaxes(-1, -2), True),
    "t": (lambda t: t.t(), lambda a: a.T, True),
    "contiguous": (lambda t: t.T.contiguous(), lambda a: a.T.copy(), True),
    "squeeze": (lambda t: t[:, None].squeeze(1), lambda a: a, True),
    "unsqueeze": (lambda t: t.unsqueeze(0), lambda a: a[None], True),
    "expand_dims": (lambda t: t.expand_dims(1), lambda a: a[:, None], True),
    "broadcast_to": (
        lambda t: t.broadcast_to(2, 3, 4),
        lambda a: np.broadcast_to(a, (2, 3, 4)),
        True,
    ),
    "expand": (lambda t: t.expand(2, -1, -1), lambda a: np.broadcast_to(a, (2, 3, 4)), True),
    "flip": (lambda t: t.flip(0), lambda a: a[::-1], True),
    "roll": (lambda t: t.roll(1, 1), lambda a: np.roll(a, 1, 1), True),
    "repeat": (lambda t: t.repeat(2, 0), lambda a: np.repeat(a, 2, 0), True),
    "tile": (lambda t: t.tile((1, 2)), lambda a: np.tile(a, (1, 2)), True),
    "take": (lambda t: t.take(np.array([0, 5, 5])), lambda a: a.take([0, 5, 5]), True),
    "take_along_axis": (
        lambda t: t.take_along_axis(INDEX[:, :3].T % 4, 1),
        lambda a: np.take_along_axis(a, INDEX[:, :3].T % 4, 1),
        True,
    ),
    "gather": (lambda t: t.gather(0, INDEX), lambda a: np.take_along_axis(a, INDEX, 0), True),
    "masked_fill": (lambda t: t.masked_fill(MASK, 0.0), lambda a: np.where(MASK, 0.0, a), True),
    "where": (lambda t: t.where(MASK, C), lambda a: np.where(MASK, a, C), True),
    "split": (lambda t: t.split([1, 3], 1)[1], lambda a: a[:, 1:], True),
    "chunk": (lambda t: t.chunk(2, 1)[1], lambda a: a[:, 2:], True),
    "pow": (lambda t: t.pow(3), lambda a: a**3, True),
    "maximum": (lambda t: t.maximum(C), lambda a: np.maximum(a, C), True),
    "minimum": (lambda t: t.minimum(C), lambda a: np.minimum(a, C), True),
    "div": (lambda t: t.div(C), lambda a: a / C, True),
    "divide": (lambda t: t.divide(C), lambda a: a / C, True),
    "floor_divide": (lambda t: t.floor_divide(C), lambda a: a // C, True),
    "matmul": (lambda t: t.matmul(B), lambda a: a @ B, True),
    "dot": (lambda t: t.dot(B), lambda a: a.dot(B), True),
    "bmm": (lambda t: t[None].bmm(B[None]), lambda a: (a @ B)[None], True),
    "eq": (lambda t: t.eq(t * 1), lambda a: a == a, False),
    "type_as": (
        lambda t: t.type_as(np.zeros(1, np.float32)),
        lambda a: a.astype(np.float32),
        False,
    ),
    "new_zeros": (lambda t: t.new_zeros(2, 5), lambda a: np.zeros((2, 5)), False),
    # float32 is too coarse for central differences: the casts' gradients are checked in float64
    "astype": (lambda t: t.astype(np.float64), lambda a: a, True),
    "float": (lambda t: t.float(), lambda a: a.astype(np.float32), False),
    "double": (lambda t: t.double(), lambda a: a, True),
    "half": (lambda t: t.half(), lambda a: a.astype(np.float16), False),
    "int": (lambda t: (t * 10).int(), lambda a: (a * 10).astype(np.int32), False),
    "long": (lambda t: (t * 10).long(), lambda a: (a * 10).astype(np.int64), False),
    "bool": (lambda t: (t > 0.5).bool(), lambda a: a > 0.5, False),
    "to": (lambda t: t.to("cpu"), lambda a: a, True),
    "cpu": (lambda t: t.cpu(), lambda a: a, True),
    "copy_to_device": (lambda t: t.copy_to_device("cpu"), lambda a: a, False),
    "detach": (lambda t: t.detach(), lambda a: a, False),
    "numpy": (lambda t: t.numpy(), lambda a: a, False),
    "tolist": (lambda t: np.array(t.tolist()), lambda a: np.array(a.tolist()), False),
    "item": (lambda t: np.array(t[1, 2].item()), lambda a: a[1, 2], False),
    "numel": (lambda t: np.array(t.numel()), lambda a: np.array(a.size), False),
    "dim": (lambda t: np.array(t.dim()), lambda a: np.array(a.ndim), False),
    "add_": (_in_place("add_", C), lambda a: a + C, False),
    "sub_": (_in_place("sub_", C), lambda a: a - C, False),
    "mul_": (_in_place("mul_", C), lambda a: a * C, False),
    "div_": (_in_place("div_", C), lambda a: a / C, False),
    "clamp_": (_in_place("clamp_", 0.3, 0.6), lambda a: np.clip(a, 0.3, 0.6), False),
    "fill_": (_in_place("fill_", 2.5), lambda a: np.full_like(a, 2.5), False),
    "zero_": (_in_place("zero_"), np.zeros_like, False),
    "copy_": (_in_place("copy_", C), lambda a: C, False),
    "inplace": (_in_place("inplace", sadl.ops.get("exp")), np.exp, False),
}

# Attributes, autograd entry points and device moves: checked by what they are for.
OTHERS = {
    "data", "dtype", "shape", "ndim", "size", "device", "grad", "grad_fn", "is_leaf",
    "requires_grad", "requires_grad_", "retain_grad", "backward", "detach_", "cuda",
    "register_post_accumulate_grad_hook", "result_class",
}  # fmt: skip


def test_the_cases_cover_every_public_tensor_method():
    public = {n for n in dir(sadl.Tensor) if not n.startswith("_")}
    assert public == set(METHODS) | OTHERS, public ^ (set(METHODS) | OTHERS)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_method_gives_numpys_values_and_central_difference_gradients(name):
    call, reference, differentiable = METHODS[name]
    out = call(sadl.Tensor(A))
    out = out.data if isinstance(out, sadl.Tensor) else np.asarray(out)
    expected = np.asarray(reference(A.copy()))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)
    if differentiable:
        gradcheck(call, A)


def test_the_attributes_and_autograd_entry_points():
    t = sadl.Tensor(A.copy(), requires_grad=True)
    assert (t.dtype, t.shape, t.ndim, t.size, t.size(), t.size(1)) == (
        A.dtype,
        (3, 4),
        2,
        12,
        (3, 4),
        4,
    )
    assert str(t.device) == "cpu" and t.is_leaf and t.grad is None and t.grad_fn is None
    seen = []
    t.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.copy()))
    h = (t * 2).retain_grad()
    assert not h.is_leaf and h.grad_fn is not None
    (h * h).sum().backward()
    np.testing.assert_allclose(t.grad, 8 * A)
    np.testing.assert_allclose(h.grad, 4 * A)
    np.testing.assert_allclose(seen[0], 8 * A)
    u = (t * 1).detach_()
    assert not u.requires_grad and u.grad_fn is None
    assert not sadl.Tensor(A).requires_grad_(False).requires_grad
    assert type(sadl.Tensor(A).data) is np.ndarray and sadl.Tensor.result_class is sadl.Tensor
    if not sadl.cuda.is_available():
        with pytest.raises(RuntimeError, match="(?i)cuda"):
            t.cuda()


# name -> (the operator on Tensors, on NumPy arrays, differentiable); the other operand is C
# (or a scalar, for the reflected forms); integer ones take integers.
INTS, J = np.array([[3, 5, 12], [7, 1, 9]]), np.array([6, 1, 2])
OPERATORS = {
    "+": (operator.add, True), "-": (operator.sub, True), "*": (operator.mul, True),
    "/": (operator.truediv, True), "//": (operator.floordiv, False),
    "%": (operator.mod, True), "**": (operator.pow, True),
    "<": (operator.lt, False), "<=": (operator.le, False), ">": (operator.gt, False),
    ">=": (operator.ge, False), "==": (operator.eq, False), "!=": (operator.ne, False),
}  # fmt: skip
INTEGER_OPERATORS = {
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "<<": operator.lshift, ">>": operator.rshift,
}  # fmt: skip
IN_PLACE = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "@": operator.imatmul,
    "&": operator.iand, "|": operator.ior, "^": operator.ixor, "<<": operator.ilshift,
    ">>": operator.irshift,
}  # fmt: skip


@pytest.mark.parametrize("symbol", sorted(OPERATORS))
def test_the_operator_and_its_reflected_form_give_numpys_values(symbol):
    op, differentiable = OPERATORS[symbol]
    np.testing.assert_allclose(op(sadl.Tensor(A), sadl.Tensor(C)).data, op(A, C))
    np.testing.assert_allclose(op(sadl.Tensor(A), 0.5).data, op(A, 0.5))
    np.testing.assert_allclose(op(0.5, sadl.Tensor(A)).data, op(0.5, A))
    np.testing.assert_allclose(op(C, sadl.Tensor(A)).data, op(C, A))
    if differentiable:
        gradcheck(op, A, C)
        gradcheck(lambda a: op(0.7, a), A)


@pytest.mark.parametrize("symbol", sorted(INTEGER_OPERATORS))
def test_the_integer_operator_and_its_reflected_form_give_numpys_values(symbol):
    op = INTEGER_OPERATORS[symbol]
    np.testing.assert_array_equal(op(sadl.Tensor(INTS), sadl.Tensor(J)).data, op(INTS, J))
    np.testing.assert_array_equal(op(sadl.Tensor(INTS), 2).data, op(INTS, 2))
    np.testing.assert_array_equal(op(2, sadl.Tensor(INTS)).data, op(2, INTS))


def test_the_unary_operators_matmul_and_divmod_give_numpys_values_and_gradients():
    t = sadl.Tensor(A)
    np.testing.assert_allclose((-t).data, -A)
    np.testing.assert_allclose((+t).data, A)
    np.testing.assert_allclose(abs(t - 0.5).data, abs(A - 0.5))
    np.testing.assert_array_equal((~sadl.Tensor(MASK)).data, ~MASK)
    np.testing.assert_array_equal((~sadl.Tensor(INTS)).data, ~INTS)
    np.testing.assert_allclose((t @ sadl.Tensor(B)).data, A @ B)
    np.testing.assert_allclose((B.tolist() @ t).data, B @ A)
    for ours, theirs in zip(divmod(t, 0.3), divmod(A, 0.3)):
        np.testing.assert_allclose(ours.data, theirs)
    for ours, theirs in zip(divmod(2.0, t), divmod(2.0, A)):
        np.testing.assert_allclose(ours.data, theirs)
    gradcheck(lambda a: -a, A)
    gradcheck(lambda a: +a, A)
    gradcheck(lambda a: abs(a - 0.5), A)
    gradcheck(lambda a, b: a @ b, A, B)
    gradcheck(lambda b: B.tolist() @ b, A)


@pytest.mark.parametrize("symbol", sorted(IN_PLACE))
def test_the_in_place_operator_writes_into_the_tensor_and_keeps_it(symbol):
    op = IN_PLACE[symbol]
    left, right = (INTS, J) if symbol in INTEGER_OPERATORS else (A, C)
    if symbol == "@":
        left, right = A[:, :3], B[:3]
    h = alias = sadl.Tensor(left.copy())
    h = op(h, sadl.Tensor(right))
    assert h is alias and isinstance(h, sadl.Tensor)  # never a 1-tuple
    np.testing.assert_allclose(h.data, op(left.copy(), right))


def test_list_matmul_tensor_backpropagates_like_an_array():
    w = sadl.Tensor(B, requires_grad=True)
    (A.tolist() @ w).sum().backward()
    np.testing.assert_allclose(w.grad, A.T @ np.ones((3, 3)))


def test_operators_and_numpy_calls_on_core_ops_load_no_plugin_module():
    code = (
        "import sys, sadl, numpy as np\n"
        "x, y = sadl.tensor([1.0, 2.0]), sadl.tensor([2.0, 1.0]); m = x > 1\n"
        "i, w = sadl.tensor([3, 4]), sadl.tensor(np.ones((2, 2)))\n"
        "r = [x < y, x <= y, x > y, x >= y, x == y, x != y, x // y, x % y, ~m, m & m, m | m,\n"
        "     m ^ m, i << 1, i >> 1, x @ w, -x, +x, abs(x), divmod(x, y), x ** 2, 2 - x]\n"
        "r += [x.std(), x.var(), x.prod(), x.erf(), x.sort(), x.clip(0, 1), x.cumprod(0)]\n"
        "r += [np.exp(x), np.less(x, y), np.var(x), np.multiply.reduce(x), np.clip(x, 0, 1)]\n"
        "r += [np.concatenate([x, y]), np.where(m, x, y), np.sort(x), np.take(x, [1])]\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('sadl_')}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "SADL_PLUGINS_STRICT": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    imported = [line for line in result.stderr.splitlines() if "|sadl_" in line.replace(" ", "")]
    assert imported == []
