"""Differential test against PyTorch: seeded random programs of ops, their values and gradients.

A program takes two or three float64 leaves of shapes that broadcast against each other
(``(m, n)``, ``(1, n)``, ``(m, 1)``, ``(n,)``), applies two to eight random steps (a unary op to
a value made so far, or a binary op to two, broadcasting), and reduces: a random reduction of
the last value plus a random weighting of every value's sum, so every step's backward rule
runs. The same program runs through ``sadl.ops`` and through ``torch`` on the same numbers; the
loss and each leaf's gradient must agree to ``RTOL`` (the two libraries' transcendental
functions differ in the last bits, nothing more). Ops whose gradient is ambiguous at ties (sort,
max) only meet ties where the gradient arriving is zero (after clip, relu, floor), so any
disagreement is a real difference from PyTorch.

The default run is CI-sized; ``SADL_TORCH_FUZZ_PROGRAMS=N`` and ``SADL_TORCH_FUZZ_SEEDS=a,b``
make a long one. PyTorch is a test reference only: without it the test skips.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import sadl

torch = pytest.importorskip("torch")
F = torch.nn.functional
ops = sadl.ops

PROGRAMS = int(os.environ.get("SADL_TORCH_FUZZ_PROGRAMS", "150"))
SEEDS = [int(s) for s in os.environ.get("SADL_TORCH_FUZZ_SEEDS", "0,1").split(",")]
RTOL = 1e-9  #: float64 programs
#: float32 programs (one in four): NumPy's and torch's float32 kernels round differently, and a
#: chain of ops amplifies it; what they check is that no op changes a dtype on the way
RTOL32 = 2e-3


def _pos(x):  # (the same guard on both sides: a domain of positive numbers)
    return abs(x) + 0.5


def _ramp(x, lib=np):
    """0, 0.1, 0.2, ... in ``x``'s shape and precision: added before a standard deviation, so no
    program makes its input constant (a maximum broadcast, ``x - x``), where its gradient
    (x - mean) / std is rounding noise over rounding noise and two libraries need not agree.
    """
    dtype = np.float32 if "float32" in str(x.dtype) else np.float64
    ramp = (np.arange(int(np.prod(x.shape))) * 0.1).astype(dtype).reshape(tuple(x.shape))
    return ramp if lib is np else lib.from_numpy(ramp)


def _index(n):
    """Indices n-1, ..., 1, 0, 0 minus one: one index twice, so its gradient adds up."""
    return np.maximum(np.arange(n)[::-1] - 1, 0)


#: name -> (sadl, torch), each a function of one value.
UNARY = {
    "exp": (lambda x: ops.exp(ops.clip(x, -4, 4)), lambda x: torch.exp(x.clamp(-4, 4))),
    "tanh": (ops.tanh, torch.tanh),
    "sigmoid": (ops.sigmoid, torch.sigmoid),
    "relu": (ops.relu, torch.relu),
    "abs": (ops.absolute, torch.abs),
    "sin": (ops.sin, torch.sin),
    "cos": (ops.cos, torch.cos),
    "sqrt": (lambda x: ops.sqrt(_pos(x)), lambda x: torch.sqrt(_pos(x))),
    "log": (lambda x: ops.log(_pos(x)), lambda x: torch.log(_pos(x))),
    "log1p": (lambda x: ops.log1p(ops.absolute(x)), lambda x: torch.log1p(x.abs())),
    "expm1": (lambda x: ops.expm1(ops.clip(x, -3, 3)), lambda x: torch.expm1(x.clamp(-3, 3))),
    "erf": (ops.erf, torch.erf),
    "erfc": (ops.erfc, torch.erfc),
    "erfinv": (lambda x: ops.erfinv(ops.tanh(x) * 0.9), lambda x: torch.erfinv(x.tanh() * 0.9)),
    "square": (ops.square, torch.square),
    "neg": (ops.negative, torch.neg),
    "reciprocal": (lambda x: ops.reciprocal(_pos(x)), lambda x: torch.reciprocal(_pos(x))),
    "arctan": (ops.arctan, torch.arctan),
    "sinh": (lambda x: ops.sinh(ops.clip(x, -3, 3)), lambda x: torch.sinh(x.clamp(-3, 3))),
    # (step functions off by 0.318, as remainder below: rounding noise around 0 is a step)
    "floor": (lambda x: ops.floor(x + 0.318), lambda x: torch.floor(x + 0.318)),
    "sign": (lambda x: ops.sign(x + 0.318), lambda x: torch.sign(x + 0.318)),
    "clip": (lambda x: ops.clip(x, -0.5, 0.7), lambda x: x.clamp(-0.5, 0.7)),
    "gelu": (ops.gelu, F.gelu),
    "gelu_tanh": (
        lambda x: ops.gelu(x, approximate="tanh"),
        lambda x: F.gelu(x, approximate="tanh"),
    ),
    "silu": (ops.silu, F.silu),
    "mish": (ops.mish, F.mish),
    "softplus": (ops.softplus, F.softplus),
    "elu": (ops.elu, F.elu),
    # (torch's celu backward with alpha != 1 is some 5e-9 off exp(x / alpha) in float64)
    "celu": (
        lambda x: ops.celu(x, alpha=0.7),
        lambda x: torch.where(x > 0, x, 0.7 * torch.expm1(x.clamp(max=0.0) / 0.7)),
    ),
    "selu": (ops.selu, F.selu),
    "leaky_relu": (ops.leaky_relu, F.leaky_relu),
    "hardtanh": (ops.hardtanh, F.hardtanh),
    "hardswish": (ops.hardswish, F.hardswish),
    # (torch's own hardsigmoid backward multiplies by float32's 1/6 in float64, 5e-9 off)
    "hardsigmoid": (ops.hardsigmoid, lambda x: (x / 6.0 + 0.5).clamp(0.0, 1.0)),
    "logsigmoid": (ops.logsigmoid, F.logsigmoid),
    "softsign": (ops.softsign, F.softsign),
    "softmax": (lambda x: ops.softmax(x, axis=-1), lambda x: torch.softmax(x, -1)),
    "log_softmax": (lambda x: ops.log_softmax(x, axis=-1), lambda x: torch.log_softmax(x, -1)),
    "softmax0": (lambda x: ops.softmax(x, axis=0), lambda x: torch.softmax(x, 0)),
    "cumsum": (lambda x: ops.cumsum(x, axis=-1), lambda x: torch.cumsum(x, -1)),
    "cumprod": (
        lambda x: ops.cumprod(ops.clip(x, 0.8, 1.2), axis=-1),
        lambda x: torch.cumprod(x.clamp(0.8, 1.2), -1),
    ),
    "cummax": (lambda x: ops.cummax(x, axis=-1)[0], lambda x: torch.cummax(x, -1).values),
    "sort": (lambda x: ops.sort(x, axis=-1), lambda x: torch.sort(x, -1).values),
    "flip": (lambda x: ops.flip(x, axis=0), lambda x: torch.flip(x, (0,))),
    "roll": (lambda x: ops.roll(x, shift=1, axis=-1), lambda x: torch.roll(x, 1, -1)),
    "tril": (
        lambda x: ops.tril(x) if x.ndim == 2 else x,
        lambda x: torch.tril(x) if x.ndim == 2 else x,
    ),
    "take": (
        lambda x: ops.take(x, indices=_index(x.shape[-1]), axis=-1),
        lambda x: torch.index_select(x, -1, torch.from_numpy(_index(x.shape[-1]))),
    ),
    "center": (lambda x: x - x.mean(axis=-1, keepdims=True), lambda x: x - x.mean(-1, True)),
    "standardize": (
        lambda x: x / (ops.std(x + _ramp(x), axis=0, keepdims=True) + 1.0),
        lambda x: x / (torch.std(x + _ramp(x, torch), 0, correction=0, keepdim=True) + 1.0),
    ),
    "logsumexp_rows": (
        lambda x: ops.logsumexp(x, axis=-1, keepdims=True) + x,
        lambda x: torch.logsumexp(x, -1, keepdim=True) + x,
    ),
    "layer_norm": (
        lambda x: ops.layer_norm(x, None, None, normalized_shape=x.shape[-1:]),
        lambda x: F.layer_norm(x, x.shape[-1:]),
    ),
    "rms_norm": (
        lambda x: ops.rms_norm(x, None, eps=1e-6, normalized_shape=x.shape[-1:]),
        lambda x: F.rms_norm(x, x.shape[-1:], eps=1e-6),
    ),
    "masked": (lambda x: ops.where(x > 0, x, x * 0.1), lambda x: torch.where(x > 0, x, x * 0.1)),
    "transpose_back": (
        lambda x: (x.T * 2.0).T,
        lambda x: (x.mT * 2.0).mT if x.ndim == 2 else x * 2.0,
    ),
    "pow_int": (lambda x: x**3, lambda x: x**3),
    "log2": (lambda x: ops.log2(_pos(x)), lambda x: torch.log2(_pos(x))),
    "log10": (lambda x: ops.log10(_pos(x)), lambda x: torch.log10(_pos(x))),
    "exp2": (lambda x: ops.exp2(ops.clip(x, -4, 4)), lambda x: torch.exp2(x.clamp(-4, 4))),
    "arcsinh": (ops.arcsinh, torch.asinh),
    "arcsin": (lambda x: ops.arcsin(ops.tanh(x) * 0.9), lambda x: torch.asin(x.tanh() * 0.9)),
    "arccos": (lambda x: ops.arccos(ops.tanh(x) * 0.9), lambda x: torch.acos(x.tanh() * 0.9)),
    "cosh": (lambda x: ops.cosh(ops.clip(x, -3, 3)), lambda x: torch.cosh(x.clamp(-3, 3))),
    "tan": (lambda x: ops.tan(ops.clip(x, -1.2, 1.2)), lambda x: torch.tan(x.clamp(-1.2, 1.2))),
    "trunc": (ops.trunc, torch.trunc),
    "softmin": (lambda x: ops.softmin(x, dim=-1), lambda x: F.softmin(x, -1)),
    "logcumsumexp": (lambda x: ops.logcumsumexp(x, dim=-1), lambda x: torch.logcumsumexp(x, -1)),
    # (kept off the zero vector, where both divide by eps = 1e-12: a gradient of 1e12 whose
    # cancellation against others depends on the order of additions)
    "normalize": (
        lambda x: ops.normalize(x + 0.5, dim=-1),
        lambda x: F.normalize(x + 0.5, dim=-1),
    ),
}


def _paired(fn):
    """``fn`` on both operands broadcast to one shape (ops that do not broadcast)."""
    return lambda a, b: fn(a + 0.0 * b, b + 0.0 * a)


def _bce_sadl(a, b):
    return ops.binary_cross_entropy_with_logits(a, ops.sigmoid(b), reduction="none")


def _bce_torch(a, b):
    return F.binary_cross_entropy_with_logits(a, torch.sigmoid(b), reduction="none")


def _soft_ce_sadl(a, b):  # (classes last, as torch's for 1-d and 2-d logits)
    return ops.cross_entropy(a, ops.softmax(b, axis=-1), reduction="none")[..., None]


def _soft_ce_torch(a, b):
    return F.cross_entropy(a, torch.softmax(b, -1), reduction="none")[..., None]


def _matmul(lib_transpose):
    def run(a, b):
        if a.ndim < 2:
            return a * b
        return (a @ lib_transpose(b)) @ b * 0.1

    return lambda a, b: run(a + 0.0 * b, b + 0.0 * a)


#: name -> (sadl, torch), each a function of two values (broadcasting).
BINARY = {
    "add": (ops.add, torch.add),
    "sub": (ops.subtract, torch.sub),
    "mul": (ops.multiply, torch.mul),
    "div": (lambda a, b: ops.divide(a, _pos(b)), lambda a, b: torch.div(a, _pos(b))),
    "maximum": (ops.maximum, torch.maximum),
    "minimum": (ops.minimum, torch.minimum),
    "pow": (
        lambda a, b: ops.power(_pos(a), ops.clip(b, -2, 2)),
        lambda a, b: torch.pow(_pos(a), b.clamp(-2, 2)),
    ),
    # (at the origin sadl's gradients are the minimal subgradient, 0, where torch's are
    # 0 / 0 = nan: a difference by design, so the second operand is kept off 0; and ``+ 0.0``
    # makes a -0 +0, as the two libraries' zero sums need not agree on the sign of a zero)
    "arctan2": (
        lambda a, b: ops.arctan2(a + 0.0, b + 0.25),
        lambda a, b: torch.atan2(a + 0.0, b + 0.25),
    ),
    "hypot": (lambda a, b: ops.hypot(a, b + 0.25), lambda a, b: torch.hypot(a, b + 0.25)),
    "logaddexp": (ops.logaddexp, torch.logaddexp),
    "where": (
        lambda a, b: ops.where(a > b, a, b * 2.0),
        lambda a, b: torch.where(a > b, a, b * 2.0),
    ),
    "matmul": (_matmul(lambda b: b.T), _matmul(lambda b: b.mT)),
    "self_mul": (lambda a, b: a * a, lambda a, b: a * a),
    "lerp": (lambda a, b: a + 0.3 * (b - a), lambda a, b: torch.lerp(a, b, 0.3)),
    # (off by 0.318: a cancellation leaves rounding noise around 0, a multiple of any divisor,
    # where the result jumps by the divisor with the sign of the noise: program 1000398101)
    "remainder": (
        lambda a, b: ops.remainder(a + 0.318, _pos(b)),
        lambda a, b: torch.remainder(a + 0.318, _pos(b)),
    ),
    "fmod": (
        lambda a, b: ops.fmod(a + 0.318, _pos(b)),
        lambda a, b: torch.fmod(a + 0.318, _pos(b)),
    ),
    "copysign": (lambda a, b: ops.copysign(a, b + 0.0), lambda a, b: torch.copysign(a, b + 0.0)),
    "logaddexp2": (ops.logaddexp2, torch.logaddexp2),
    "bce_logits": (_paired(_bce_sadl), _paired(_bce_torch)),
    "soft_cross_entropy": (_paired(_soft_ce_sadl), _paired(_soft_ce_torch)),
}

#: name -> (sadl, torch), each reducing a value to a scalar.
REDUCE = {
    "sum": (lambda x: x.sum(), lambda x: x.sum()),
    "mean": (lambda x: x.mean(), lambda x: x.mean()),
    "max": (lambda x: x.max(), lambda x: x.max()),
    "min": (lambda x: x.min(), lambda x: x.min()),
    "logsumexp": (ops.logsumexp, lambda x: torch.logsumexp(x.reshape(-1), 0)),
    "var": (lambda x: ops.var(x), lambda x: torch.var(x, correction=0)),
    "std_ddof1": (
        lambda x: ops.std(x + _ramp(x), ddof=1) if x.size > 1 else x.sum(),
        lambda x: torch.std(x + _ramp(x, torch)) if x.numel() > 1 else x.sum(),
    ),
    "norm": (lambda x: ops.norm(x + 1.0), lambda x: torch.linalg.vector_norm(x + 1.0)),
    "prod": (
        lambda x: ops.prod(ops.clip(x, 0.9, 1.1)),
        lambda x: torch.prod(x.clamp(0.9, 1.1)),
    ),
    "row_max": (lambda x: x.max(axis=-1).sum(), lambda x: x.amax(-1).sum()),
    "row_var": (
        lambda x: ops.var(x, axis=0).sum(),
        lambda x: torch.var(x, 0, correction=0).sum(),
    ),
}


class Program:
    """A random program: leaf shapes and values, steps, a reduction, weights of the sums."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.seed = seed
        m, n = int(rng.integers(1, 5)), int(rng.integers(1, 6))
        shapes = [(m, n), (1, n), (m, 1), (n,)]
        n_leaves = int(rng.integers(2, 4))
        picked = [shapes[0]] + [shapes[int(rng.integers(4))] for _ in range(n_leaves - 1)]
        self.dtype = np.float32 if seed % 4 == 0 else np.float64
        self.leaves = [rng.standard_normal(s).astype(self.dtype) for s in picked]
        self.steps: list[tuple[str, ...]] = []
        pool = n_leaves
        for _ in range(int(rng.integers(2, 9))):
            if rng.random() < 0.6:
                self.steps.append(("u", str(rng.choice(list(UNARY))), str(rng.integers(pool))))
            else:
                i, j = rng.integers(pool, size=2)
                self.steps.append(("b", str(rng.choice(list(BINARY))), str(i), str(j)))
            pool += 1
        self.reduce = str(rng.choice(list(REDUCE)))
        self.weights = rng.standard_normal(pool).tolist()

    def run(self, side: int, leaves: list) -> object:
        pool = list(leaves)
        for step in self.steps:
            if step[0] == "u":
                pool.append(UNARY[step[1]][side](pool[int(step[2])]))
            else:
                pool.append(BINARY[step[1]][side](pool[int(step[2])], pool[int(step[3])]))
        loss = REDUCE[self.reduce][side](pool[-1])
        for w, value in zip(self.weights, pool):
            loss = loss + w * value.sum()
        return loss

    def __repr__(self) -> str:
        shapes = [x.shape for x in self.leaves]
        return (
            f"Program({self.seed}): {np.dtype(self.dtype).name} leaves {shapes}, {self.steps}, "
            f"reduce {self.reduce}"
        )


def _sadl_side(program: Program) -> tuple[float, list]:
    leaves = [sadl.Tensor(x.copy(), requires_grad=True) for x in program.leaves]
    loss = program.run(0, leaves)
    loss.backward()
    return float(loss.item()), [x.grad for x in leaves]


def _torch_side(program: Program) -> tuple[float, list]:
    leaves = [torch.tensor(x, requires_grad=True) for x in program.leaves]
    loss = program.run(1, leaves)
    loss.backward()
    return float(loss.item()), [x.grad.numpy() for x in leaves]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs_match_pytorch(seed):
    rng = np.random.default_rng(seed)
    for _ in range(PROGRAMS):
        program = Program(int(rng.integers(1 << 30)))
        with np.errstate(all="ignore"):
            loss, grads = _sadl_side(program)
        want, want_grads = _torch_side(program)
        where = repr(program)
        tol = RTOL if program.dtype == np.float64 else RTOL32
        np.testing.assert_allclose(loss, want, rtol=tol, atol=tol, err_msg=where)
        for k, (g, w) in enumerate(zip(grads, want_grads)):
            assert g is not None and g.shape == w.shape and g.dtype == w.dtype, (where, k)
            scale = max(1.0, float(np.abs(w).max(initial=0.0)))
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{where} {k}")


def test_every_vocabulary_entry_runs_on_both_sides():
    """Each entry is exercised on its own once, so a seed that never draws it still checks it."""
    x = np.random.default_rng(3).standard_normal((3, 4))
    y = np.random.default_rng(4).standard_normal((1, 4))
    for table, arity in ((UNARY, 1), (BINARY, 2), (REDUCE, 1)):
        for name, (mine, theirs) in table.items():
            values = [x, y][:arity]
            a = [sadl.Tensor(v.copy(), requires_grad=True) for v in values]
            b = [torch.tensor(v, requires_grad=True) for v in values]
            out_a, out_b = mine(*a).sum(), theirs(*b).sum()
            out_a.backward()
            out_b.backward()
            np.testing.assert_allclose(out_a.item(), out_b.item(), RTOL, RTOL, err_msg=name)
            for ta, tb in zip(a, b):  # (an operand an entry ignores has no gradient)
                assert (ta.grad is None) == (tb.grad is None), name
                if tb.grad is not None:
                    np.testing.assert_allclose(ta.grad, tb.grad, RTOL, RTOL, err_msg=name)
