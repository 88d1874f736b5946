"""Differential test of ``sadl.compile``: seeded random programs, run eagerly and compiled.

Each program is built twice from its seed (identical state: parameters, optimizer, buffers,
generator) and called several times, with state changed between calls the same way on both
sides. Everything a user can see is compared after every call: results, the arguments, the
parameters, their ``.grad``, optimizer state, module buffers and the default generator's state.
With ``fusion=False`` they must be equal bit for bit; with fusion on, within ``FUSED_RTOL``. A
program the compiler refuses with a ``CompileError`` counts as refused, never as a pass that
hides a mismatch (refusals are reported and bounded).

The default run is CI-sized (``PROGRAMS`` programs per seed, 2 seeds). ``SADL_FUZZ_PROGRAMS=N``
and ``SADL_FUZZ_SEEDS=a,b,...`` make a long run (``nox -s fuzz``).
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import math
import os
import warnings

import numpy as np
import pytest
import sadl
from compile_models import MLP
from plan_check import assert_plan_disjoint
from sadl import CompileError, CompileWarning
from sadl.random import resolve_generator

PROGRAMS = int(os.environ.get("SADL_FUZZ_PROGRAMS", "40"))
SEEDS = [int(s) for s in os.environ.get("SADL_FUZZ_SEEDS", "0,1").split(",")]
FUSED_RTOL = 1e-4  #: relative tolerance with fusion on (blocked transcendental loops)
CALLS = 4

ops = sadl.ops
#: sadl-layers and sadl-optim widen the vocabulary where installed (core's own venv has neither)
HAVE_LAYERS = importlib.util.find_spec("sadl_layers") is not None
HAVE_OPTIM = importlib.util.find_spec("sadl_optim") is not None


# ---------------------------------------------------------------------------- vocabulary
def _pos(x):
    return ops.absolute(x) + 0.5


def _reversed_repeat(n):
    """Indices n-2, ..., 1, 0, 0: the shape kept, one index twice (its gradient adds up)."""
    return np.maximum(np.arange(n)[::-1] - 1, 0)


def _slice_iadd(x):
    h = x * 1.0
    h[0] += 1.0  # an in-place op through a view of a non-leaf
    return h


UNARY = {
    "slice_iadd": _slice_iadd,
    "exp": lambda x: ops.exp(ops.clip(x, -4, 4)),
    "tanh": lambda x: ops.tanh(x),
    "sigmoid": lambda x: ops.sigmoid(x),
    "relu": lambda x: ops.relu(x),
    "abs": lambda x: ops.absolute(x),
    "sin": lambda x: ops.sin(x),
    "cos": lambda x: ops.cos(x),
    "sqrt": lambda x: ops.sqrt(_pos(x)),
    "log": lambda x: ops.log(_pos(x)),
    "log1p": lambda x: ops.log1p(ops.absolute(x)),
    "expm1": lambda x: ops.expm1(ops.clip(x, -3, 3)),
    "erf": lambda x: ops.erf(x),
    "erfc": lambda x: ops.erfc(x),
    "ndtr": lambda x: ops.ndtr(x),
    "erfinv": lambda x: ops.erfinv(ops.tanh(x) * 0.9),
    "square": lambda x: ops.square(x),
    "neg": lambda x: ops.negative(x),
    "gelu": lambda x: ops.gelu(x),
    "silu": lambda x: ops.silu(x),
    "mish": lambda x: ops.mish(x),
    "softplus": lambda x: ops.softplus(x),
    "elu": lambda x: ops.elu(x),
    "selu": lambda x: ops.selu(x),
    "leaky_relu": lambda x: ops.leaky_relu(x),
    "hardtanh": lambda x: ops.hardtanh(x),
    "hardswish": lambda x: ops.hardswish(x),
    "logsigmoid": lambda x: ops.logsigmoid(x),
    "arctan": lambda x: ops.arctan(x),
    "sinh": lambda x: ops.sinh(ops.clip(x, -3, 3)),
    "cbrt": lambda x: ops.cbrt(x),
    "reciprocal": lambda x: ops.reciprocal(_pos(x)),
    "floor": lambda x: ops.floor(x),
    "rint": lambda x: ops.rint(x),
    "sign": lambda x: ops.sign(x),
    "cumsum": lambda x: ops.cumsum(x, axis=-1),
    "cummax": lambda x: ops.cummax(x, axis=-1)[0],
    "flip": lambda x: ops.flip(x, axis=0),
    "roll": lambda x: ops.roll(x, shift=1, axis=-1),
    "softmax": lambda x: ops.softmax(x, axis=-1),
    "log_softmax": lambda x: ops.log_softmax(x, axis=-1),
    "sort": lambda x: ops.sort(x, axis=-1),
    "clip": lambda x: ops.clip(x, -0.5, 0.7),
    "cumprod": lambda x: ops.cumprod(ops.clip(x, 0.8, 1.2), axis=-1),
    "cumprod_zeros": lambda x: ops.cumprod(ops.where(x > 1.2, 0.0, ops.clip(x, 0.8, 1.2)), axis=0),
    "softsign": lambda x: ops.softsign(x),
    "take": lambda x: ops.take(x, indices=_reversed_repeat(x.shape[-1]), axis=-1),
    "take_sorted": lambda x: ops.take_along_axis(x, indices=ops.argsort(x, axis=0), axis=0),
    "predicates": lambda x: ops.where(
        ops.signbit(x) | ops.isclose(x, ops.rint(x), atol=0.1), x * 0.5, x
    ),
    "inf_guard": lambda x: ops.where(ops.isposinf(x * 1e308) | ops.isneginf(x * 1e308), 0.0, x),
    "masked": lambda x: ops.where(x > 0, x, x * 0.1),
    "tril": lambda x: ops.tril(x),
}

BINARY = {
    "add": lambda a, b: ops.add(a, b),
    "sub": lambda a, b: ops.subtract(a, b),
    "mul": lambda a, b: ops.multiply(a, b),
    "div": lambda a, b: ops.divide(a, _pos(b)),
    "maximum": lambda a, b: ops.maximum(a, b),
    "minimum": lambda a, b: ops.minimum(a, b),
    "pow": lambda a, b: ops.power(_pos(a), ops.clip(b, -2, 2)),
    "arctan2": lambda a, b: ops.arctan2(a, b),
    "hypot": lambda a, b: ops.hypot(a, b) + 0.0,
    "logaddexp": lambda a, b: ops.logaddexp(a, b),
    "where": lambda a, b: ops.where(a > b, a, b),
    "isclose": lambda a, b: ops.where(ops.isclose(a, b, atol=0.5), a * b, a - b),
    "count_rows": lambda a, b: a * ops.count_nonzero(b > 0, axis=-1, keepdims=True),
    "matmul": lambda a, b: ops.matmul(a, ops.transpose(b)) @ b * 0.1,
    "self_mul": lambda a, b: a * a,  # one value, two operands
}

REDUCE = {
    "sum": lambda x: x.sum(),
    "mean": lambda x: x.mean(),
    "max": lambda x: x.max(),
    "logsumexp": lambda x: ops.logsumexp(x),
    "var": lambda x: x.var(),
    "std": lambda x: ops.std(x + 0.0) + 0.0,
    "norm": lambda x: ops.norm(x + 1.0),
    "prod": lambda x: ops.prod(ops.clip(x, 0.9, 1.1)),
    "row_prod": lambda x: ops.prod(ops.where(x > 1.2, 0.0, ops.clip(x, -1.1, 1.1)), axis=-1).sum(),
    "row_var": lambda x: ops.var(x, axis=0, ddof=1).sum() + ops.std(x, axis=-1).sum(),
    "count_nonzero": lambda x: x.sum() * ops.count_nonzero(x > 0.2),
    "tensordot": lambda x: ops.tensordot(x, x, axes=([0], [0])).sum() * 0.1,
    "masked_sum": lambda x: (x[x > 0.1] ** 2).sum(),  # value-dependent size and its backward
    "masked_mean": lambda x: ops.sqrt(x[x < 0.3] ** 2 + 1).mean() if True else None,
    "row_max": lambda x: x.max(axis=-1).sum(),
    "take": lambda x: ops.take_along_axis(
        x, indices=ops.argmax(x, axis=-1)[..., None], axis=-1
    ).sum(),
}


def _available(table, arity):
    """The entries whose ops are installed (a layer op without sadl-layers is dropped; each
    entry looks its op up when called).
    """
    probe = sadl.tensor(np.linspace(-1, 1, 6).reshape(2, 3))
    kept = {}
    for name, fn in table.items():
        try:
            with np.errstate(all="ignore"):
                fn(*[probe] * arity)
        except sadl.UnknownNameError:
            continue
        kept[name] = fn
    return kept


UNARY = _available(UNARY, 1)
BINARY = _available(BINARY, 2)
REDUCE = _available(REDUCE, 1)


# ---------------------------------------------------------------------------- programs
@dataclasses.dataclass
class Result:
    """A dataclass result (a replay must hand back fresh values in a new one)."""

    loss: object
    last: object


Pair = collections.namedtuple("Pair", "loss last")

#: How a program hands back its two results.
WRAP = {
    "tuple": lambda a, b: (a, b),
    "list": lambda a, b: [a, b],
    "dict": lambda a, b: {"loss": a, "last": b},
    "namedtuple": Pair,
    "dataclass": Result,
    "array": lambda a, b: (a.numpy(), b),
}


def _inside(x, gen, spec):
    made = np.random.default_rng(spec.seed % 97)  # made anew by every call, as in eager
    return x + sadl.rand(*x.shape, rng=made, dtype=x.dtype)


#: How a program draws from a NumPy generator of its own (``gen``: captured, made in build).
PRIVATE_RNG = {
    "rand": lambda x, gen, spec: x + sadl.rand(*x.shape, rng=gen, dtype=x.dtype),
    "resolve": lambda x, gen, spec: (
        x + resolve_generator(gen).standard_normal(x.shape).astype(x.dtype)
    ),
    "dropout": lambda x, gen, spec: sadl.nn.Dropout(0.3, rng=gen)(x),  # built in the call
    "inside": _inside,
}


class Expression:
    """A random expression over inputs, captured parameters and random draws."""

    def __init__(self, seed: int, big: bool) -> None:
        rng = np.random.default_rng(seed)
        self.seed = seed
        self.shape = (256, 256) if big else (int(rng.integers(2, 6)), int(rng.integers(2, 7)))
        self.steps = []
        pool = 3
        for _ in range(int(rng.integers(2, 9))):
            if rng.random() < 0.55:
                name = str(rng.choice(list(UNARY)))
                self.steps.append(("u", name, int(rng.integers(pool))))
            else:
                name = str(rng.choice(list(BINARY)))
                self.steps.append(("b", name, int(rng.integers(pool)), int(rng.integers(pool))))
            pool += 1
        self.draw = rng.random() < 0.3
        self.rng_int = rng.random() < 0.2
        self.scalar = rng.random() < 0.5
        self.reduce = str(rng.choice(list(REDUCE)))
        self.grad = rng.random() < 0.7
        self.closure_array = rng.random() < 0.3
        self.rebind = rng.random() < 0.2
        self.flip = rng.random() < 0.2
        self.wrap = str(rng.choice(list(WRAP)))
        self.accumulate = rng.random() < 0.2  # .grad kept between calls (accumulates)
        self.no_grad_call = rng.random() < 0.15  # one call under sadl.no_grad()
        self.checkpoint = rng.random() < 0.15
        self.inner_draw = rng.random() < 0.3  # a dropout-like draw inside the body
        self.reseed = rng.random() < 0.1  # sadl.manual_seed inside the call
        # Drawn from a stream of their own, so every earlier program of a seed is unchanged.
        extra = np.random.default_rng([seed, 1])
        #: a NumPy generator the function uses: captured (through sadl.rand, resolve_generator,
        #: a Dropout built in the call) or made in the call
        self.private_rng = str(extra.choice(["none"] * 5 + list(PRIVATE_RNG)))
        if self.private_rng == "dropout" and not HAVE_LAYERS:
            self.private_rng = "rand"
        self.numpy_only = extra.random() < 0.2  # NumPy work on a captured array alone
        self.backward_rule = extra.random() < 0.2  # a backward rule reading a captured array
        self.seed_grad = self.grad and extra.random() < 0.2  # a captured seed, through a scatter
        self.features = {f"unary:{s[1]}" if s[0] == "u" else f"binary:{s[1]}" for s in self.steps}
        self.features.add(f"reduce:{self.reduce}")
        self.features.add(f"result:{self.wrap}")
        flags = ("draw", "rng_int", "scalar", "grad", "closure_array", "rebind", "flip")
        for flag in (*flags, "accumulate", "no_grad_call", "checkpoint", "inner_draw", "reseed"):
            if getattr(self, flag):
                self.features.add(flag)
        for flag in ("numpy_only", "backward_rule", "seed_grad"):
            if getattr(self, flag):
                self.features.add(flag)
        if self.private_rng != "none":
            self.features.add(f"private_rng:{self.private_rng}")

    def build(self):
        """Fresh state and the step function (called twice: identical state)."""
        sadl.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed + 1)
        dtype = np.float32 if self.seed % 3 else np.float64
        w = sadl.Parameter(rng.standard_normal(self.shape).astype(dtype))
        state = {
            "w": w,
            "table": rng.standard_normal(self.shape[-1]).astype(dtype),
            "g": sadl.tensor(rng.standard_normal(self.shape).astype(dtype)),
        }
        if self.private_rng != "none":
            state["gen"] = np.random.default_rng(self.seed + 2)
        if self.seed_grad:
            n = self.shape[-1]
            state["seed"] = np.random.default_rng(self.seed + 3).standard_normal((n, n))
            state["seed"] = state["seed"].astype(dtype)
        spec = self

        def step(x, s):
            pool = [x, state["w"] * 1.0 if not spec.rebind else state["g"] + state["w"], x * s]
            if spec.closure_array:
                pool[0] = pool[0] * state["table"]
            if spec.draw:
                pool[1] = pool[1] + sadl.randn(*spec.shape, dtype=dtype)
            if spec.rng_int:
                pool[2] = pool[2] + sadl.rand(*spec.shape, rng=7, dtype=dtype)
            if spec.private_rng != "none":
                pool[0] = PRIVATE_RNG[spec.private_rng](pool[0], state.get("gen"), spec)
            if spec.backward_rule:  # arctan2's gradient reads table * table + b * b
                pool[1] = np.arctan2(state["table"], pool[1])

            def body(*pool):
                pool = list(pool)
                for k, st in enumerate(spec.steps):
                    if st[0] == "u":
                        pool.append(UNARY[st[1]](pool[st[2]]))
                    else:
                        pool.append(BINARY[st[1]](pool[st[2]], pool[st[3]]))
                    if spec.inner_draw and k == 0:  # checkpointing replays it in backward
                        keep = sadl.rand(*pool[-1].shape, dtype=dtype) > 0.3
                        pool[-1] = pool[-1] * keep
                return pool[-1]

            if spec.reseed:
                sadl.manual_seed(spec.seed % 1000)

            if spec.checkpoint and sadl.is_grad_enabled():
                last = sadl.checkpoint(body, *pool)
            else:
                last = body(*pool)
            if spec.numpy_only:  # no tensor in np.exp(...): recomputed from the array's contents
                last = last * np.exp(np.tanh(state["table"]))
            loss = REDUCE[spec.reduce](last) + last.sum() * 0.01
            if spec.grad and spec.seed_grad:
                picked = last + pool[1]  # pool[1] reads the parameter: its .grad shows the seed
                if picked.requires_grad:
                    picked[picked.argmax(0)].backward(state["seed"])  # the seed reaches a scatter
            elif spec.grad and loss.requires_grad:
                loss.backward()
            return WRAP[spec.wrap](loss.detach(), last.detach())

        def between(i):
            """The same change between calls on both sides."""
            r = np.random.default_rng((self.seed, i))
            if self.closure_array or self.numpy_only or self.backward_rule:
                state["table"][...] = r.standard_normal(self.shape[-1])
            if self.seed_grad:
                state["seed"] += r.standard_normal(state["seed"].shape).astype(dtype)
            if self.rebind and i % 2:
                state["g"] = state["g"] * 0.5
            if self.flip:
                state["w"].requires_grad = bool(i % 3 != 1)
            if not self.accumulate:
                state["w"].grad = None
            return (
                sadl.tensor(r.standard_normal(self.shape).astype(dtype)),
                [0.0, -0.0, 1.5, -2.0][i % 4] if self.scalar else 1.0,
            )

        return state, step, between, [w], []


LAYERS = (
    {}
    if not HAVE_LAYERS
    else {
        "linear": lambda r, c: (sadl.nn.Linear(c, c), c),
        "tanh": lambda r, c: (sadl.nn.Tanh(), c),
        "gelu": lambda r, c: (sadl.nn.GELU(), c),
        "gelu_tanh": lambda r, c: (sadl.nn.GELU("tanh"), c),
        "silu": lambda r, c: (sadl.nn.SiLU(), c),
        "mish": lambda r, c: (sadl.nn.Mish(), c),
        "elu": lambda r, c: (sadl.nn.ELU(), c),
        "softplus": lambda r, c: (sadl.nn.Softplus(), c),
        "softsign": lambda r, c: (sadl.nn.Softsign(), c),
        "layernorm": lambda r, c: (sadl.nn.LayerNorm(c), c),
        "rmsnorm": lambda r, c: (sadl.nn.RMSNorm(c), c),
        "batchnorm": lambda r, c: (sadl.nn.BatchNorm1d(c), c),
        "dropout": lambda r, c: (sadl.nn.Dropout(0.25), c),
        "dropout_rng": lambda r, c: (sadl.nn.Dropout(0.25, rng=3), c),
    }
)

#: What feeds a 1x1 convolution (its window is a view of that layer's output), on (n, 2, 6).
CONV_MID = (
    {}
    if not HAVE_LAYERS
    else {
        "conv": lambda: [],  # straight after the 3-wide convolution
        "conv1x1": lambda: [sadl.nn.Conv1d(2, 2, 1)],
        "silu": lambda: [sadl.nn.SiLU()],
        "gelu": lambda: [sadl.nn.GELU()],
        "tanh": lambda: [sadl.nn.Tanh()],
        "groupnorm": lambda: [sadl.nn.GroupNorm(1, 2)],
        "batchnorm": lambda: [sadl.nn.BatchNorm1d(2)],
        "dropout": lambda: [sadl.nn.Dropout(0.25)],
        "padded_conv": lambda: [sadl.nn.Conv1d(2, 2, 3, padding=1)],
    }
)

OPTIMIZERS = {
    "sgd": lambda p: sadl.SGD(p, lr=0.05),
    "sgd_momentum": lambda p: sadl.SGD(p, lr=0.05, momentum=0.9),
    "adam": lambda p: sadl.Adam(p, lr=0.01),
}
OPTIM_OPTIMIZERS = {
    "adamw": lambda p: sadl.optim.AdamW(p, lr=0.01),
    "rmsprop": lambda p: sadl.optim.RMSprop(p, lr=0.01),
    "adagrad": lambda p: sadl.optim.Adagrad(p, lr=0.05),
    "lion": lambda p: sadl.optim.Lion(p, lr=0.001),
}
if HAVE_OPTIM:
    OPTIMIZERS |= OPTIM_OPTIMIZERS

SCHEDULES = {"none": None}
OPTIM_SCHEDULES = {
    "step": lambda o: sadl.optim.StepLR(o, 2, 0.5),
    "cosine": lambda o: sadl.optim.CosineWithWarmup(o, 1, 6),
    "warmup": lambda o: sadl.optim.LinearWarmup(o, 2),
}
if HAVE_OPTIM:
    SCHEDULES |= OPTIM_SCHEDULES


class _Stack(sadl.nn.Module):
    """Core's MLP then the random layers (core's Module only: no sadl-layers needed)."""

    def __init__(self, mods):
        super().__init__()
        self.depth = len(mods)
        for k, m in enumerate(mods):
            setattr(self, f"m{k}", m)

    def forward(self, x):
        for k in range(self.depth):
            x = getattr(self, f"m{k}")(x)
        return x


class Training:
    """A training step over random layers, optimizer, schedule and zero_grad placement."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.seed = seed
        n_layers = int(rng.integers(1, 5)) if LAYERS else 0
        self.layers = [str(rng.choice(list(LAYERS))) for _ in range(n_layers)]
        self.dropout = bool(rng.random() < 0.3)
        self.optimizer = str(rng.choice(list(OPTIMIZERS)))
        self.schedule = str(rng.choice(list(SCHEDULES)))
        self.zero = str(rng.choice(["first", "middle", "model_first", "none_first", "closure"]))
        self.set_to_none = bool(rng.random() < 0.5)
        self.conv = HAVE_LAYERS and rng.random() < 0.25
        self.eval_switch = rng.random() < 0.2
        self.batch_switch = rng.random() < 0.25
        self.replace_param = rng.random() < 0.1
        self.flip = rng.random() < 0.15
        extra = np.random.default_rng([seed, 1])  # new choices: earlier programs unchanged
        self.conv1x1 = HAVE_LAYERS and extra.random() < 0.3  # a 1x1 conv after another layer
        self.conv = self.conv or self.conv1x1
        self.conv_mid = str(extra.choice(list(CONV_MID))) if self.conv1x1 else ""
        self.features = {f"layer:{n}" for n in self.layers}
        if self.conv1x1:
            self.features.add(f"conv1x1_after:{self.conv_mid}")
        self.features |= {f"optimizer:{self.optimizer}", f"schedule:{self.schedule}"}
        self.features |= {f"zero_grad:{self.zero}:{self.set_to_none}"}
        for flag in ("conv", "eval_switch", "batch_switch", "replace_param", "flip", "dropout"):
            if getattr(self, flag):
                self.features.add(flag)

    def build(self):
        sadl.manual_seed(self.seed)
        c = 6
        mods = []
        if self.conv:
            mods.append(sadl.nn.Conv1d(2, 2, 3, padding=1))
            if self.conv1x1:
                mods += [*CONV_MID[self.conv_mid](), sadl.nn.Conv1d(2, 2, 1)]
            mods += [sadl.nn.MaxPool1d(2), sadl.nn.Flatten()]
        r = np.random.default_rng(self.seed)
        for name in self.layers:
            mods.append(LAYERS[name](r, c)[0])
        mods.append(MLP(seed=self.seed % 1000, n_in=c, n_hidden=8, n_out=3, dropout=self.dropout))
        model = _Stack(mods)
        opt = OPTIMIZERS[self.optimizer](list(model.parameters()))
        make_schedule = SCHEDULES[self.schedule]
        schedule = make_schedule(opt) if make_schedule else None
        spec = self
        state = {"model": model, "opt": opt}

        def loss_of(x):
            return (model(x) ** 2).mean()

        def step(x, s):
            if spec.zero == "closure":

                def closure():
                    opt.zero_grad(set_to_none=spec.set_to_none)
                    loss = loss_of(x)
                    loss.backward()
                    return loss

                return opt.step(closure).detach()
            if spec.zero == "first":
                opt.zero_grad(set_to_none=spec.set_to_none)
            elif spec.zero == "model_first":
                model.zero_grad(set_to_none=spec.set_to_none)
            loss = loss_of(x) * s
            if spec.zero == "middle":
                opt.zero_grad(set_to_none=spec.set_to_none)
            loss.backward()
            opt.step()
            if spec.zero == "none_first":
                opt.zero_grad(set_to_none=spec.set_to_none)
            return loss.detach()

        def between(i):
            r = np.random.default_rng((self.seed, i))
            if schedule is not None and i:
                schedule.step()
            if self.eval_switch:
                model.train(i % 3 != 2)
            if self.flip:
                first = next(iter(model.parameters()))
                first.requires_grad = i % 3 != 1
            if self.replace_param and i == 2:
                head = mods[-1]
                head.b2 = sadl.Parameter(np.full(3, 0.25, head.b2.data.dtype))
            batch = 5 if not self.batch_switch or i % 2 == 0 else 3
            shape = (batch, 2, c) if self.conv else (batch, c)
            x = sadl.tensor(r.standard_normal(shape).astype(np.float32))
            return x, [1.0, 0.5][i % 2]

        params = list(model.parameters())
        return state, step, between, params, [model, opt]


# ---------------------------------------------------------------------------- comparison
def _snapshot(out, params, holders, state):
    """Copies of everything a user can see after a call."""

    def arr(x):
        if isinstance(x, sadl.Tensor):
            return np.array(x.numpy(), copy=True)
        if isinstance(x, np.ndarray | np.generic):
            return np.array(x, copy=True)
        if dataclasses.is_dataclass(x):
            return {"dataclass": type(x).__name__, **{k: arr(v) for k, v in vars(x).items()}}
        if isinstance(x, tuple | list):
            return [type(x).__name__, *(arr(v) for v in x)]
        if isinstance(x, dict):
            return {k: arr(v) for k, v in x.items()}
        return x

    seen = {
        "out": arr(out),
        "params": [arr(p) for p in params],
        "grads": [None if p.grad is None else arr(p.grad) for p in params],
        "requires_grad": [p.requires_grad for p in params],
        "generator": sadl.default_generator().bit_generator.state["state"],
    }
    for k, h in enumerate(holders):
        seen[f"state{k}"] = arr(h.state_dict())
    if "gen" in state:  # a NumPy generator of the program's own
        seen["private_generator"] = state["gen"].bit_generator.state["state"]
    return seen


def _compare(a, b, exact, where=""):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _compare(a[k], b[k], exact, f"{where}.{k}")
        return
    if isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, exact, f"{where}[{k}]")
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype, where
        if exact or a.dtype.kind not in "fc":
            assert a.tobytes() == b.tobytes(), (where, a, b)
        else:
            np.testing.assert_allclose(
                a, b, rtol=FUSED_RTOL, atol=FUSED_RTOL, equal_nan=True, err_msg=where
            )
        return
    if isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
        return
    assert a == b, (where, a, b)


def _call(program, fn, i, args):
    if getattr(program, "no_grad_call", False) and i == 2:
        with sadl.no_grad():
            return fn(*args)
    return fn(*args)


def run_program(program, fusion):
    """Run ``program`` eagerly and compiled; returns "ok" or "refused" (asserts equality)."""
    state_e, eager, between_e, params_e, holders_e = program.build()
    seen_e = []
    for i in range(CALLS):
        args = between_e(i)
        params_e = _current_params(program, state_e, params_e)
        try:
            with np.errstate(all="ignore"):
                out = _call(program, eager, i, args)
                seen_e.append(_snapshot(out, params_e, holders_e, state_e))
        except (ValueError, RuntimeError, TypeError):  # a program eager rejects: not compile's
            return "skipped"
    state_c, step, between_c, params_c, holders_c = program.build()
    compiled = sadl.compile(step, fusion=fusion)
    for i in range(CALLS):
        args = between_c(i)
        params_c = _current_params(program, state_c, params_c)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", CompileWarning)
                out = _call(program, compiled, i, args)
        except CompileError:
            return "refused"
        seen = _snapshot(out, params_c, holders_c, state_c)
        if fusion:
            _loosen_null_gradient_params(program, seen_e[: i + 1], seen)
        _compare(seen_e[i], seen, exact=not fusion, where=f"call {i}")
    if compiled.graph is not None:
        assert_plan_disjoint(compiled.graph)  # so an overlap the values miss still fails
    return "ok"


#: Optimizers whose step is about lr whatever the gradient's size (m / sqrt(v), sign).
ADAPTIVE = {"adam", "adamw", "rmsprop", "adagrad", "lion"}


def _loosen_null_gradient_params(program, seen_e, seen):
    """With fusion, a kernel's rounding (within its stated tolerance) of a gradient that is zero
    but for rounding (a norm's bias before a batch norm, which removes any shift) becomes a step
    of lr under an adaptive optimizer (docs/kernels.md, the GPT test): such a parameter, and a
    batch norm's running mean that follows its shift, is compared to ``lr`` per call; every
    other one, its gradient and the optimizer state, to ``FUSED_RTOL``. Replaces the compiled
    parameter by eager's where it is within that bound.
    """
    if getattr(program, "optimizer", None) not in ADAPTIVE:
        return
    lr = 0.01
    grads = [s["grads"] for s in seen_e]
    scale = max((np.abs(g).max() for call in grads for g in call if g is not None), default=0.0)
    bound = lr * len(seen_e)
    null, shifted = [], False  # shifted: a null parameter moved beyond the tolerance
    for k, (a, b) in enumerate(zip(seen_e[-1]["params"], seen["params"])):
        # (null: within the tolerance gradients are compared with, relative to the largest;
        # fuzz seed 5101 met one at 1e-5 of it, its kernel rounding 5e-10, an lr-sized step)
        if all(call[k] is None or np.abs(call[k]).max() <= FUSED_RTOL * scale for call in grads):
            null.append(a.tobytes())
            if a.shape == b.shape and np.abs(a - b).max() <= bound:
                shifted = shifted or bool(np.abs(a - b).max() > FUSED_RTOL)
                seen["params"][k] = a
    model = seen_e[-1]["state0"]  # the model's state_dict holds the parameters too
    for name, a in model.items():
        b = seen["state0"].get(name)
        near = b is not None and a.shape == b.shape and np.abs(a - b).max() <= bound
        # A batch norm's running mean follows the shift of a null bias before it (fuzz seed
        # 6204: a 1x1 conv's bias 0.0175 apart, the running mean 0.1 of that): within the bound
        # when a null parameter moved; its running variance does not see a shift.
        follows = shifted and name.endswith("running_mean")
        if (a.tobytes() in null or follows) and near:
            seen["state0"][name] = a


def _current_params(program, state, params):
    return list(state["model"].parameters()) if "model" in state else params


def programs(seed, n):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        sub = int(rng.integers(1 << 30))
        kind = rng.random()
        if kind < 0.45:
            yield Expression(sub, big=False), False
        elif kind < 0.55:
            yield Expression(sub, big=True), True
        else:
            yield Training(sub), bool(rng.random() < 0.2)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs_compiled_match_eager(seed):
    results = {"ok": 0, "refused": 0, "skipped": 0}
    features: set[str] = set()
    for program, fusion in programs(seed, PROGRAMS):
        try:
            outcome = run_program(program, fusion)
        except AssertionError as error:
            raise AssertionError(
                f"program {type(program).__name__}({program.seed}) fusion={fusion} "
                f"{sorted(program.features)}: {error}"
            ) from error
        results[outcome] += 1
        features |= program.features
    print(f"seed {seed}: {results}, {len(features)} features")
    assert results["refused"] <= PROGRAMS // 10, results
