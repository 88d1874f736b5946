"""Shared test problems for sadl-optim: a fixed quadratic and a small MLP, in float64.

Each problem's loss is written once with operators and methods that sadl Tensors and torch
tensors share, so the very same expression is differentiated by sadl and by torch. Every problem
also has a hand-written NumPy gradient, for references that need no framework at all (Lion).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sadl


@dataclass
class Problem:
    name: str
    init: list[np.ndarray]  # initial parameter values
    consts: list[np.ndarray]  # data the loss reads (matrices, inputs, targets)
    loss: Callable[[list[Any], list[Any]], Any]  # (params, consts) -> scalar, any framework
    grad: Callable[[list[np.ndarray], list[np.ndarray]], list[np.ndarray]]  # NumPy gradient


def _quadratic_loss(params, consts):
    x, w = params
    a, b, m = consts
    return 0.5 * (x @ (a @ x)) - b @ x + 0.5 * (w * (w @ m)).sum() + 0.1 * w.sum() * x[0]


def _quadratic_grad(params, consts):
    x, w = params
    a, b, m = consts
    gx = a @ x - b
    gx[0] += 0.1 * w.sum()
    gw = w @ m + 0.1 * x[0]
    return [gx, gw]


def quadratic() -> Problem:
    """``0.5 x'Ax - b'x + 0.5 tr(W M W') + 0.1 sum(W) x0`` with A, M symmetric positive definite."""
    rng = np.random.default_rng(1234)
    q = rng.standard_normal((5, 5))
    a = q @ q.T / 5 + np.eye(5)
    r = rng.standard_normal((4, 4))
    m = r @ r.T / 4 + 0.5 * np.eye(4)
    b = rng.standard_normal(5)
    init = [rng.standard_normal(5), rng.standard_normal((3, 4))]
    return Problem("quadratic", init, [a, b, m], _quadratic_loss, _quadratic_grad)


def _mlp_loss(params, consts):
    w1, b1, w2, b2 = params
    x, y = consts
    hidden = (x @ w1.T + b1).tanh()
    return ((hidden @ w2.T + b2 - y) ** 2).mean()


def _mlp_grad(params, consts):
    w1, b1, w2, b2 = params
    x, y = consts
    hidden = np.tanh(x @ w1.T + b1)
    residual = hidden @ w2.T + b2 - y
    d_out = 2.0 * residual / residual.size
    d_hidden = (d_out @ w2) * (1.0 - hidden * hidden)
    return [d_hidden.T @ x, d_hidden.sum(0), d_out.T @ hidden, d_out.sum(0)]


def mlp() -> Problem:
    """A 4-8-2 tanh MLP with mean squared error on 16 fixed samples."""
    rng = np.random.default_rng(5678)
    x = rng.standard_normal((16, 4))
    y = np.stack([np.sin(x[:, 0]) + x[:, 1], x[:, 2] * x[:, 3]], axis=1)
    init = [
        rng.standard_normal((8, 4)) * 0.5,
        rng.standard_normal(8) * 0.1,
        rng.standard_normal((2, 8)) * 0.5,
        rng.standard_normal(2) * 0.1,
    ]
    return Problem("mlp", init, [x, y], _mlp_loss, _mlp_grad)


PROBLEMS = {"quadratic": quadratic, "mlp": mlp}

# A group layout per problem: which parameter indices go in which param group.
GROUP_SPLITS = {"quadratic": [[0], [1]], "mlp": [[0, 2], [1, 3]]}


def make_groups(params, split, overrides):
    """Param groups from ``split`` (index lists) with per-group hyperparameter ``overrides``."""
    return [
        {"params": [params[i] for i in idx], **extra}
        for idx, extra in zip(split, overrides, strict=True)
    ]


def sadl_params(problem: Problem, dtype=np.float64) -> list[sadl.Parameter]:
    return [sadl.Parameter(v.astype(dtype)) for v in problem.init]


def train_sadl(problem, params, optimizer, steps, scheduler=None):
    """Run ``steps`` steps; return the parameter values after each step (copies)."""
    consts = [sadl.tensor(c) for c in problem.consts]
    trajectory = []
    for _ in range(steps):
        optimizer.zero_grad()
        problem.loss(params, consts).backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        trajectory.append([p.data.copy() for p in params])
    return trajectory


def train_torch(torch, problem, params, optimizer, steps, scheduler=None):
    consts = [torch.tensor(c) for c in problem.consts]
    trajectory = []
    for _ in range(steps):
        optimizer.zero_grad()
        problem.loss(params, consts).backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory


def assert_same_trajectory(ours, reference, atol=1e-6):
    """Every step, every parameter within ``atol``; and the run really moved the parameters."""
    assert len(ours) == len(reference)
    for step, (a, b) in enumerate(zip(ours, reference)):
        for i, (x, y) in enumerate(zip(a, b)):
            np.testing.assert_allclose(
                x, y, rtol=0, atol=atol, err_msg=f"step {step + 1}, parameter {i}"
            )
    moved = max(float(np.max(np.abs(x - y))) for x, y in zip(ours[-1], ours[0]))
    assert moved > 1e-3, "the trajectory hardly moved: the comparison would prove nothing"
