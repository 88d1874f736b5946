"""Lion against a hand-written NumPy reference of the published update rule.

torch has no Lion, so the reference is Algorithm 2 of Chen et al. (2023), "Symbolic Discovery of
Optimization Algorithms", with the gradients from each problem's hand-written NumPy gradient.
"""

import numpy as np
import pytest
from optim_problems import (
    GROUP_SPLITS,
    PROBLEMS,
    assert_same_trajectory,
    make_groups,
    sadl_params,
    train_sadl,
)
from sadl_optim import Lion

STEPS = 50


def reference_lion(problem, hyper_per_param, steps):
    """The paper's rule, parameter by parameter:

    c = beta1 * m + (1 - beta1) * g
    theta = theta - lr * (sign(c) + weight_decay * theta)
    m = beta2 * m + (1 - beta2) * g
    """
    thetas = [v.copy() for v in problem.init]
    moments = [np.zeros_like(v) for v in thetas]
    trajectory = []
    for _ in range(steps):
        grads = problem.grad(thetas, problem.consts)
        for i, (g, hyper) in enumerate(zip(grads, hyper_per_param)):
            lr, (beta1, beta2), wd = hyper["lr"], hyper["betas"], hyper["weight_decay"]
            c = beta1 * moments[i] + (1 - beta1) * g
            thetas[i] = thetas[i] - lr * (np.sign(c) + wd * thetas[i])
            moments[i] = beta2 * moments[i] + (1 - beta2) * g
        trajectory.append([t.copy() for t in thetas])
    return trajectory


@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
def test_numpy_gradients_agree_with_sadl(problem_name):
    # The reference's gradients must be right, or the comparison below proves nothing.
    problem = PROBLEMS[problem_name]()
    params = sadl_params(problem)
    problem.loss(params, problem.consts).backward()
    for p, g in zip(params, problem.grad(problem.init, problem.consts)):
        np.testing.assert_allclose(p.grad, g, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 1e-2},
        {"lr": 1e-2, "betas": (0.95, 0.98), "weight_decay": 0.5},
        {"lr": 3e-3, "betas": (0.0, 0.5), "weight_decay": 1.0},
    ],
)
def test_trajectory_equals_reference(problem_name, kwargs):
    problem = PROBLEMS[problem_name]()
    params = sadl_params(problem)
    got = train_sadl(problem, params, Lion(params, **kwargs), STEPS)
    full = {"betas": (0.9, 0.99), "weight_decay": 0.0, **kwargs}
    want = reference_lion(problem, [full] * len(params), STEPS)
    assert_same_trajectory(got, want)


def test_param_groups_with_different_hyperparameters():
    problem = PROBLEMS["mlp"]()
    split = GROUP_SPLITS["mlp"]
    overrides = [{"lr": 5e-3, "weight_decay": 0.2}, {"betas": (0.5, 0.9)}]
    params = sadl_params(problem)
    opt = Lion(make_groups(params, split, overrides), lr=1e-2)
    hyper = [None] * len(params)
    for idx, extra in zip(split, overrides):
        for i in idx:
            hyper[i] = {"lr": 1e-2, "betas": (0.9, 0.99), "weight_decay": 0.0, **extra}
    assert_same_trajectory(
        train_sadl(problem, params, opt, STEPS), reference_lion(problem, hyper, STEPS)
    )


def test_every_coordinate_moves_by_lr():
    # Lion's signature property: the update (without decay) has magnitude lr everywhere.
    problem = PROBLEMS["mlp"]()
    params = sadl_params(problem)
    before = [p.data.copy() for p in params]
    opt = Lion(params, lr=1e-3)
    problem.loss(params, [np.asarray(c) for c in problem.consts]).backward()
    opt.step()
    for p, b in zip(params, before):
        np.testing.assert_allclose(np.abs(p.data - b), 1e-3, rtol=1e-9)
