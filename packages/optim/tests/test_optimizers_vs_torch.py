"""Trajectories over 50 steps equal torch.optim's to 1e-6 in float64, on a quadratic and an MLP.

Covers sadl-optim's AdamW, RMSprop, Adagrad and Adadelta, core's SGD and Adam variants, param
groups with different hyperparameters, and optimizers driven by the schedules. (Lion has no torch
counterpart: test_lion.py checks it against a NumPy reference.)
"""

import pytest
import sadl
import sadl_optim
from optim_problems import (
    GROUP_SPLITS,
    PROBLEMS,
    assert_same_trajectory,
    make_groups,
    sadl_params,
    train_sadl,
    train_torch,
)

torch = pytest.importorskip("torch", reason="torch is the reference for these parity tests")
pytestmark = pytest.mark.torch

STEPS = 50

CASES = [
    ("SGD", {"lr": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.02}),
    ("Adam", {"lr": 0.02, "weight_decay": 0.05}),
    ("Adam", {"lr": 0.02, "betas": (0.8, 0.95), "amsgrad": True}),
    ("AdamW", {"lr": 0.02}),
    ("AdamW", {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True}),
    ("AdamW", {"lr": 0.02, "betas": (0.85, 0.9), "eps": 1e-6, "weight_decay": 0.0}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.005, "momentum": 0.9}),
    (
        "RMSprop",
        {"lr": 0.005, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.01},
    ),
    ("Adagrad", {"lr": 0.1}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (
        "Adagrad",
        {
            "lr": 0.1,
            "lr_decay": 0.01,
            "weight_decay": 0.01,
            "initial_accumulator_value": 0.1,
            "eps": 1e-8,
        },
    ),
]

GROUP_CASES = [
    ("SGD", {"lr": 0.05, "momentum": 0.9}, [{"lr": 0.02}, {"momentum": 0.5, "weight_decay": 0.1}]),
    ("Adam", {"lr": 0.02}, [{"amsgrad": True}, {"lr": 0.01, "betas": (0.7, 0.9)}]),
    (
        "AdamW",
        {"lr": 0.02, "weight_decay": 0.1},
        [{"lr": 0.01}, {"weight_decay": 0.0, "betas": (0.8, 0.99), "amsgrad": True}],
    ),
    ("RMSprop", {"lr": 0.01}, [{"centered": True}, {"momentum": 0.9, "alpha": 0.95}]),
    ("Adagrad", {"lr": 0.1}, [{"lr_decay": 0.05}, {"lr": 0.05, "eps": 1e-6, "weight_decay": 0.1}]),
    ("Adadelta", {"lr": 0.5}, [{"rho": 0.8}, {"lr": 1.0, "weight_decay": 0.1}]),
]


def ours(name):
    return getattr(sadl_optim, name, None) or getattr(sadl, name)


def case_id(case):
    return f"{case[0]}-" + "-".join(f"{k}={v}" for k, v in case[1].items())


@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_trajectory_equals_torch(problem_name, case):
    name, kwargs = case
    problem = PROBLEMS[problem_name]()
    params = sadl_params(problem)
    tparams = [torch.tensor(v, requires_grad=True) for v in problem.init]
    got = train_sadl(problem, params, ours(name)(params, **kwargs), STEPS)
    want = train_torch(
        torch, problem, tparams, getattr(torch.optim, name)(tparams, **kwargs), STEPS
    )
    assert_same_trajectory(got, want)


@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
@pytest.mark.parametrize("case", GROUP_CASES, ids=lambda c: c[0])
def test_param_groups_with_different_hyperparameters(problem_name, case):
    name, defaults, overrides = case
    problem = PROBLEMS[problem_name]()
    split = GROUP_SPLITS[problem_name]
    params = sadl_params(problem)
    tparams = [torch.tensor(v, requires_grad=True) for v in problem.init]
    opt = ours(name)(make_groups(params, split, overrides), **defaults)
    topt = getattr(torch.optim, name)(make_groups(tparams, split, overrides), **defaults)
    for group, tgroup in zip(opt.param_groups, topt.param_groups):
        for key, value in group.items():
            if key != "params":
                assert value == (tuple(tgroup[key]) if key == "betas" else tgroup[key]), key
    assert_same_trajectory(
        train_sadl(problem, params, opt, STEPS), train_torch(torch, problem, tparams, topt, STEPS)
    )


SCHEDULED = [
    (
        "AdamW",
        {"lr": 0.02, "weight_decay": 0.05},
        lambda opt: sadl_optim.OneCycle(opt, max_lr=0.05, total_steps=STEPS, cycle_momentum=True),
        lambda topt: torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.05, total_steps=STEPS),
    ),
    (
        "SGD",
        {"lr": 0.05, "momentum": 0.9},
        lambda opt: sadl_optim.OneCycle(
            opt, max_lr=[0.1, 0.05], total_steps=STEPS, anneal_strategy="linear",
            cycle_momentum=True, three_phase=True,
        ),
        lambda topt: torch.optim.lr_scheduler.OneCycleLR(
            topt, max_lr=[0.1, 0.05], total_steps=STEPS, anneal_strategy="linear",
            three_phase=True,
        ),
    ),
    (
        "RMSprop",
        {"lr": 0.01},
        lambda opt: sadl_optim.StepLR(opt, step_size=7, gamma=0.5),
        lambda topt: torch.optim.lr_scheduler.StepLR(topt, step_size=7, gamma=0.5),
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", SCHEDULED, ids=lambda c: c[0])
def test_trajectory_under_a_schedule_equals_torch(case):
    name, kwargs, schedule, tschedule = case
    problem = PROBLEMS["mlp"]()
    split = GROUP_SPLITS["mlp"]
    params = sadl_params(problem)
    tparams = [torch.tensor(v, requires_grad=True) for v in problem.init]
    opt = ours(name)(make_groups(params, split, [{}, {}]), **kwargs)
    topt = getattr(torch.optim, name)(make_groups(tparams, split, [{}, {}]), **kwargs)
    got = train_sadl(problem, params, opt, STEPS - 1, schedule(opt))
    want = train_torch(torch, problem, tparams, topt, STEPS - 1, tschedule(topt))
    assert_same_trajectory(got, want)


def test_adagrad_honours_a_per_group_initial_accumulator_value():
    # torch.optim.Adagrad fills every group's accumulator with the constructor's value and ignores
    # a per-group one; sadl honours it. Reference: one torch Adagrad per group.
    problem = PROBLEMS["mlp"]()
    split = GROUP_SPLITS["mlp"]
    values = [0.0, 1.0]
    params = sadl_params(problem)
    opt = sadl_optim.Adagrad(
        make_groups(params, split, [{"initial_accumulator_value": v} for v in values]), lr=0.1
    )
    tparams = [torch.tensor(v, requires_grad=True) for v in problem.init]
    topts = [
        torch.optim.Adagrad([tparams[i] for i in idx], lr=0.1, initial_accumulator_value=v)
        for idx, v in zip(split, values)
    ]

    class Both:
        def zero_grad(self):
            for t in topts:
                t.zero_grad()

        def step(self):
            for t in topts:
                t.step()

    assert_same_trajectory(
        train_sadl(problem, params, opt, STEPS), train_torch(torch, problem, tparams, Both(), STEPS)
    )
