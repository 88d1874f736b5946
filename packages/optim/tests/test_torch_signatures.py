"""The optimizers take torch's arguments: signatures, ``maximize``, the performance switches."""

import dataclasses
import inspect

import numpy as np
import pytest
import sadl
import sadl_optim
from optim_problems import PROBLEMS, assert_same_trajectory, sadl_params, train_sadl

TORCH_NAMED = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta"]


def ours(name):
    return getattr(sadl.optim, name)


@pytest.mark.torch
@pytest.mark.parametrize("name", TORCH_NAMED)
def test_signature_lists_torchs_parameters_with_torchs_defaults(name):
    torch = pytest.importorskip("torch", reason="torch's signatures are the reference")
    theirs = inspect.signature(getattr(torch.optim, name)).parameters
    mine = inspect.signature(ours(name)).parameters
    missing = [p for p in theirs if p not in mine]
    assert not missing, f"{name} lacks torch's parameters {missing}"
    for p in theirs.values():
        if p.default is not inspect.Parameter.empty:
            assert mine[p.name].default == p.default, (name, p.name)


def test_nanogpt_finds_fused_in_adamws_signature():
    # nanoGPT's configure_optimizers: fused_available = 'fused' in inspect.signature(AdamW)...
    assert "fused" in inspect.signature(sadl.optim.AdamW).parameters


def _negated(problem):
    return dataclasses.replace(problem, loss=lambda params, consts: -problem.loss(params, consts))


@pytest.mark.parametrize("name", TORCH_NAMED)
@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
def test_maximize_of_the_negated_loss_is_minimizing_the_loss(name, problem_name):
    problem = PROBLEMS[problem_name]()
    kwargs = {"lr": 0.02, "weight_decay": 0.01}
    if name == "SGD":
        kwargs["momentum"] = 0.9
    down = sadl_params(problem)
    up = sadl_params(problem)
    want = train_sadl(problem, down, ours(name)(down, **kwargs), 10)
    got = train_sadl(_negated(problem), up, ours(name)(up, maximize=True, **kwargs), 10)
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)  # -(-g) is g exactly


@pytest.mark.torch
@pytest.mark.parametrize("name", TORCH_NAMED)
def test_maximize_equals_torch(name):
    torch = pytest.importorskip("torch", reason="torch is the reference")
    problem = _negated(PROBLEMS["quadratic"]())
    kwargs = {"lr": 0.01, "maximize": True}
    params = sadl_params(problem)
    tparams = [torch.tensor(v, requires_grad=True) for v in problem.init]
    from optim_problems import train_torch

    got = train_sadl(problem, params, ours(name)(params, **kwargs), 30)
    want = train_torch(torch, problem, tparams, getattr(torch.optim, name)(tparams, **kwargs), 30)
    assert_same_trajectory(got, want)


def test_performance_switches_change_nothing():
    problem = PROBLEMS["mlp"]()
    plain, switched = sadl_params(problem), sadl_params(problem)
    want = train_sadl(problem, plain, sadl.optim.AdamW(plain, lr=0.01), 5)
    opt = sadl.optim.AdamW(switched, lr=0.01, fused=True, foreach=True, capturable=True)
    got = train_sadl(problem, switched, opt, 5)
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert opt.param_groups[0]["fused"] is True  # kept in the group, as torch keeps it


def test_differentiable_steps_are_refused():
    w = sadl.Parameter(np.ones(2))
    with pytest.raises(ValueError, match="differentiable=True is not supported"):
        sadl_optim.AdamW([w], differentiable=True)
    with pytest.raises(ValueError, match="maximize"):
        sadl.optim.SGD([w], lr=0.1, maximize="yes")


def test_schedulers_are_under_torchs_module_name():
    from sadl.optim.lr_scheduler import CosineAnnealingLR, ExponentialLR, LambdaLR, StepLR

    assert StepLR is sadl_optim.StepLR
    assert (CosineAnnealingLR, ExponentialLR, LambdaLR) == (
        sadl_optim.CosineAnnealingLR,
        sadl_optim.ExponentialLR,
        sadl_optim.LambdaLR,
    )
    assert sadl.optim.clip_grad_norm is sadl_optim.clip_grad_norm
    assert sadl.nn.utils.clip_grad_norm_ is sadl_optim.clip_grad_norm
    assert sadl.nn.utils.clip_grad_value_ is sadl_optim.clip_grad_value


def test_a_torch_optimizer_or_schedule_sadl_lacks_names_the_nearest():
    with pytest.raises(AttributeError, match=r"for torch's NAdam, use sadl\.optim\.Adam"):
        sadl.optim.NAdam  # noqa: B018
    with pytest.raises(AttributeError, match=r"for torch's OneCycleLR, use sadl\.optim\.OneCycle"):
        sadl.optim.lr_scheduler.OneCycleLR  # noqa: B018
