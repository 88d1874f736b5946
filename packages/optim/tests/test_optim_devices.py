"""The device matrix for sadl-optim: every optimizer step, every schedule and gradient clipping
on every device equal the CPU's (float64, 1e-6), and their state stays on the device.

``device`` is "cpu", "strict" (the strict CuPy stand-in) or "cuda" (where a GPU is).
"""

import math

import numpy as np
import pytest
import sadl
import sadl_optim
from optim_problems import GROUP_SPLITS, PROBLEMS, make_groups
from sadl.backends import device_of
from sadl.testing import assert_close

STEPS = 8

OPTIMIZERS = [
    ("AdamW", {"lr": 0.02, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.02, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.01}),
    ("RMSprop", {"lr": 0.01}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1}),
    ("Lion", {"lr": 0.01, "weight_decay": 0.1}),
    ("LAMB", {"lr": 0.01, "weight_decay": 0.1}),
    ("Muon", {"lr": 0.02, "weight_decay": 0.1}),
    ("Muon", {"lr": 0.02, "nesterov": False, "adjust_lr_fn": "match_rms_adamw"}),
]

#: Muon takes matrices only: it gets the MLP's two weight matrices (one per group).
SPLITS = {"Muon": [[0], [2]]}

SCHEDULES = [
    ("StepLR", lambda opt: sadl_optim.StepLR(opt, step_size=3, gamma=0.5)),
    ("LinearWarmup", lambda opt: sadl_optim.LinearWarmup(opt, warmup_steps=4)),
    (
        "CosineWithWarmup",
        lambda opt: sadl_optim.CosineWithWarmup(opt, warmup_steps=2, total_steps=STEPS),
    ),
    (
        "OneCycle",
        lambda opt: sadl_optim.OneCycle(opt, max_lr=0.05, total_steps=STEPS, cycle_momentum=True),
    ),
    ("MultiStepLR", lambda opt: sadl_optim.MultiStepLR(opt, milestones=[2, 5], gamma=0.5)),
    # stepped with the device loss tensor; patience 0 and a threshold no step beats: it acts
    (
        "ReduceLROnPlateau",
        lambda opt: sadl_optim.ReduceLROnPlateau(opt, patience=0, factor=0.5, threshold=0.5),
    ),
]


def train(device, name, kwargs, schedule=None):
    """STEPS steps of the MLP problem on ``device``: (params, optimizer, lrs seen)."""
    problem = PROBLEMS["mlp"]()
    params = [sadl.Parameter(v, device=device) for v in problem.init]
    consts = [sadl.tensor(c, device=device) for c in problem.consts]
    split = SPLITS.get(name, GROUP_SPLITS["mlp"])
    opt = getattr(sadl_optim, name)(make_groups(params, split, [{}, {}]), **kwargs)
    scheduler = schedule(opt) if schedule is not None else None
    lrs = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = problem.loss(params, consts)
        loss.backward()
        opt.step()
        if isinstance(scheduler, sadl_optim.ReduceLROnPlateau):
            scheduler.step(loss)
        elif scheduler is not None:
            scheduler.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    return params, opt, lrs


def states(opt, params):
    mine = {id(p) for group in opt.param_groups for p in group["params"]}
    return [
        {k: v for k, v in opt.state[p].items() if hasattr(v, "shape")}
        for p in params
        if id(p) in mine
    ]


@pytest.mark.parametrize(
    ("name", "kwargs"), OPTIMIZERS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_optimizer_steps_on_device_match_the_cpu(name, kwargs, device):
    cpu_params, cpu_opt, _ = train("cpu", name, kwargs)
    dev_params, dev_opt, _ = train(device, name, kwargs)
    assert_close(dev_params, cpu_params, device=device)
    assert_close(states(dev_opt, dev_params), states(cpu_opt, cpu_params), device=device)
    # The CPU run's state resumes on the device, and a device state resumes on the CPU.
    split = SPLITS.get(name, GROUP_SPLITS["mlp"])
    resumed = [sadl.Parameter(p.numpy(), device=device) for p in cpu_params]
    opt = getattr(sadl_optim, name)(make_groups(resumed, split, [{}, {}]), **kwargs)
    opt.load_state_dict(cpu_opt.state_dict())
    assert_close(states(opt, resumed), states(cpu_opt, cpu_params), device=device)
    back = [sadl.Parameter(p.numpy()) for p in dev_params]
    opt = getattr(sadl_optim, name)(make_groups(back, split, [{}, {}]), **kwargs)
    opt.load_state_dict(dev_opt.state_dict())
    assert_close(states(opt, back), states(cpu_opt, cpu_params), device="cpu")


@pytest.mark.parametrize(
    ("name", "schedule"), SCHEDULES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_schedules_drive_device_optimizers_like_cpu_ones(name, schedule, device):
    kwargs = {"lr": 0.02, "weight_decay": 0.05}
    cpu_params, cpu_opt, cpu_lrs = train("cpu", "AdamW", kwargs, schedule)
    dev_params, dev_opt, dev_lrs = train(device, "AdamW", kwargs, schedule)
    assert dev_lrs == cpu_lrs
    assert len({step[0] for step in cpu_lrs}) > 1, "the schedule should change the lr"
    assert all(isinstance(lr, float) for step in dev_lrs for lr in step)
    assert_close(dev_params, cpu_params, device=device)


def gradients(device, scale=1.0):
    rng = np.random.default_rng(0)
    params = [sadl.Parameter(rng.standard_normal(s), device=device) for s in ((3, 4), (4,), ())]
    for i, p in enumerate(params):
        p.grad = sadl.tensor(scale * (i + 1) * rng.standard_normal(p.shape), device=device).data
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_on_device_matches_the_cpu(norm_type, device):
    cpu, dev = gradients("cpu", 10.0), gradients(device, 10.0)
    total_cpu = sadl_optim.clip_grad_norm(cpu, max_norm=1.0, norm_type=norm_type)
    total_dev = sadl_optim.clip_grad_norm(dev, max_norm=1.0, norm_type=norm_type)
    assert isinstance(total_cpu, float)  # numpy.float64
    # like torch's 0-d tensor: a 0-d array left on the device, read by float()
    assert total_dev.shape == () and device_of(total_dev).type == device
    assert float(total_dev) == pytest.approx(total_cpu, rel=1e-12)
    assert_close([p.grad for p in dev], [p.grad for p in cpu], device=device)


def test_clip_grad_value_on_device_matches_the_cpu(device):
    cpu, dev = gradients("cpu", 3.0), gradients(device, 3.0)
    sadl_optim.clip_grad_value(cpu, 0.5)
    sadl_optim.clip_grad_value(dev, 0.5)
    assert_close([p.grad for p in dev], [p.grad for p in cpu], device=device)
    assert all(device_of(p.grad).type == device for p in dev)
