"""Learning-rate schedules: step-by-step parity with torch.optim.lr_scheduler, shapes, resume,
JSON-able state, clear errors."""

import json
import math

import numpy as np
import pytest
import sadl
import sadl_optim
from optim_problems import GROUP_SPLITS, PROBLEMS, make_groups, train_sadl
from sadl_optim import (
    Adagrad,
    AdamW,
    CosineWithWarmup,
    LinearWarmup,
    Lion,
    LRScheduler,
    MultiStepLR,
    OneCycle,
    RMSprop,
    StepLR,
)

BASE_LRS = [0.1, 0.03]


def two_groups(cls=sadl.SGD, lrs=BASE_LRS, **kwargs):
    params = [sadl.Parameter(np.ones(2)), sadl.Parameter(np.ones(3))]
    return cls([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)], **kwargs)


def torch_two_groups(torch, cls="SGD", lrs=BASE_LRS, **kwargs):
    params = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    opt_cls = getattr(torch.optim, cls)
    return opt_cls([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)], **kwargs)


def lrs_over(scheduler, optimizer, steps):
    """The lrs at step 0 (after construction) and after each of ``steps`` steps."""
    out = [scheduler.get_last_lr()]
    assert out[0] == [g["lr"] for g in optimizer.param_groups]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        out.append(scheduler.get_last_lr())
        assert out[-1] == [g["lr"] for g in optimizer.param_groups]
    return np.array(out)


# ---------------------------------------------------------------------------- torch parity
def cosine_lambda(warmup, total, min_lr, base):
    """The documented CosineWithWarmup formula as a LambdaLR factor."""

    def factor(t):
        if t < warmup:
            return (t + 1) / (warmup + 1)
        p = min(1.0, (t - warmup) / (total - warmup))
        return (min_lr + (base - min_lr) * 0.5 * (1 + math.cos(math.pi * p))) / base

    return factor


def warmup_lambda(warmup):
    return lambda t: (t + 1) / (warmup + 1) if t < warmup else 1.0


PARITY = {
    "StepLR": (
        lambda opt: StepLR(opt, step_size=3, gamma=0.5),
        lambda torch, opt: torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    ),
    "CosineWithWarmup": (
        lambda opt: CosineWithWarmup(opt, warmup_steps=5, total_steps=30, min_lr=0.01),
        lambda torch, opt: torch.optim.lr_scheduler.LambdaLR(
            opt, [cosine_lambda(5, 30, 0.01, base) for base in BASE_LRS]
        ),
    ),
    "CosineWithWarmup-no-warmup": (
        lambda opt: CosineWithWarmup(opt, warmup_steps=0, total_steps=20),
        lambda torch, opt: torch.optim.lr_scheduler.LambdaLR(
            opt, [cosine_lambda(0, 20, 0.0, base) for base in BASE_LRS]
        ),
    ),
    "LinearWarmup-as-LambdaLR": (
        lambda opt: LinearWarmup(opt, warmup_steps=8),
        lambda torch, opt: torch.optim.lr_scheduler.LambdaLR(opt, warmup_lambda(8)),
    ),
    "LinearWarmup-as-LinearLR": (
        lambda opt: LinearWarmup(opt, warmup_steps=8),
        lambda torch, opt: torch.optim.lr_scheduler.LinearLR(
            opt, start_factor=1 / 9, end_factor=1.0, total_iters=8
        ),
    ),
    "MultiStepLR": (
        lambda opt: MultiStepLR(opt, milestones=[3, 8, 8, 20], gamma=0.5),
        lambda torch, opt: torch.optim.lr_scheduler.MultiStepLR(
            opt, milestones=[3, 8, 8, 20], gamma=0.5
        ),
    ),
    "MultiStepLR-unsorted": (
        lambda opt: MultiStepLR(opt, milestones=[12, 2], gamma=0.3),
        lambda torch, opt: torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[12, 2], gamma=0.3),
    ),
    "ExponentialLR": (
        lambda opt: sadl_optim.ExponentialLR(opt, gamma=0.9),
        lambda torch, opt: torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9),
    ),
    "CosineAnnealingLR": (
        lambda opt: sadl_optim.CosineAnnealingLR(opt, T_max=10, eta_min=1e-3),
        lambda torch, opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-3),
    ),
    "LambdaLR-per-group": (
        lambda opt: sadl_optim.LambdaLR(opt, [lambda t: 0.95**t, lambda t: 1 / (1 + t)]),
        lambda torch, opt: torch.optim.lr_scheduler.LambdaLR(
            opt, [lambda t: 0.95**t, lambda t: 1 / (1 + t)]
        ),
    ),
    "OneCycle": (
        lambda opt: OneCycle(opt, max_lr=0.5, total_steps=40),
        lambda torch, opt: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=0.5, total_steps=40, cycle_momentum=False
        ),
    ),
    "OneCycle-linear-per-group": (
        lambda opt: OneCycle(
            opt, max_lr=[0.5, 0.2], total_steps=37, pct_start=0.25, anneal_strategy="linear",
            div_factor=10.0, final_div_factor=100.0,
        ),
        lambda torch, opt: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=[0.5, 0.2], total_steps=37, pct_start=0.25, anneal_strategy="linear",
            div_factor=10.0, final_div_factor=100.0, cycle_momentum=False,
        ),
    ),
    "OneCycle-three-phase": (
        lambda opt: OneCycle(opt, max_lr=0.3, total_steps=41, pct_start=0.2, three_phase=True),
        lambda torch, opt: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=0.3, total_steps=41, pct_start=0.2, three_phase=True,
            cycle_momentum=False,
        ),
    ),
}  # fmt: skip


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(PARITY))
def test_lrs_equal_torch_step_by_step(name):
    torch = pytest.importorskip("torch", reason="torch is the reference for this parity test")
    ours, theirs = PARITY[name]
    opt = two_groups()
    topt = torch_two_groups(torch)
    scheduler = ours(opt)
    tscheduler = theirs(torch, topt)
    steps = getattr(scheduler, "total_steps", 25) + 5
    if isinstance(scheduler, OneCycle):
        steps = scheduler.total_steps  # torch allows exactly total_steps steps
    got = lrs_over(scheduler, opt, steps)
    want = [tscheduler.get_last_lr()]
    for _ in range(steps):
        topt.step()
        tscheduler.step()
        want.append(tscheduler.get_last_lr())
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12, atol=1e-15)
    assert len(set(got[:, 0].round(12))) > 2, "the schedule should actually change the lr"


@pytest.mark.torch
@pytest.mark.parametrize(
    ("ours", "theirs", "kwargs"),
    [
        (sadl.SGD, "SGD", {"momentum": 0.9}),
        (AdamW, "AdamW", {}),
        (RMSprop, "RMSprop", {"momentum": 0.5}),
        (sadl.Adam, "Adam", {"betas": (0.8, 0.95)}),
    ],
)
def test_onecycle_momentum_cycling_equals_torch(ours, theirs, kwargs):
    torch = pytest.importorskip("torch", reason="torch is the reference for this parity test")
    opt = two_groups(ours, **kwargs)
    topt = torch_two_groups(torch, theirs, **kwargs)
    scheduler = OneCycle(
        opt, max_lr=0.4, total_steps=30, cycle_momentum=True, base_momentum=[0.8, 0.7]
    )
    tscheduler = torch.optim.lr_scheduler.OneCycleLR(
        topt, max_lr=0.4, total_steps=30, base_momentum=[0.8, 0.7]
    )
    key = "betas" if "betas" in opt.defaults else "momentum"
    for _ in range(30):
        for group, tgroup in zip(opt.param_groups, topt.param_groups):
            assert group["lr"] == pytest.approx(tgroup["lr"], rel=1e-12)
            ours_m = group[key][0] if key == "betas" else group[key]
            theirs_m = tgroup[key][0] if key == "betas" else tgroup[key]
            assert ours_m == pytest.approx(theirs_m, rel=1e-12)
            if key == "betas":
                assert group["betas"][1] == tgroup["betas"][1]
        opt.step()
        topt.step()
        scheduler.step()
        tscheduler.step()


# ---------------------------------------------------------------------------- shapes
def test_cosine_with_warmup_shape():
    opt = two_groups()
    warmup, total, floor = 10, 50, 0.005
    lrs = lrs_over(CosineWithWarmup(opt, warmup, total, min_lr=floor), opt, total + 10)
    for g, base in enumerate(BASE_LRS):
        column = lrs[:, g]
        assert 0 < column[0] <= base / warmup  # starts near 0, never exactly 0
        assert np.all(np.diff(column[: warmup + 1]) > 0)  # rises during warmup
        assert column[warmup] == base  # peaks at the base lr at step warmup_steps
        assert np.all(np.diff(column[warmup : total + 1]) < 0)  # then decays
        assert column[total] == pytest.approx(floor, abs=1e-15)  # reaches the floor
        assert np.all(column[total:] == column[total])  # and stays there
        middle = warmup + (total - warmup) // 2
        assert column[middle] == pytest.approx((base + floor) / 2)  # cosine: halfway at mid


def test_linear_warmup_shape():
    opt = two_groups()
    lrs = lrs_over(LinearWarmup(opt, warmup_steps=4), opt, 10)
    for g, base in enumerate(BASE_LRS):
        np.testing.assert_allclose(lrs[:5, g], base * np.arange(1, 6) / 5)
        assert np.all(lrs[4:, g] == base)
    opt = two_groups()
    assert np.all(lrs_over(LinearWarmup(opt, warmup_steps=0), opt, 3) == BASE_LRS)


def test_step_lr_has_no_drift():
    opt = two_groups()
    lrs = lrs_over(StepLR(opt, step_size=1, gamma=0.9), opt, 200)
    np.testing.assert_array_equal(lrs[200], [b * 0.9**200 for b in BASE_LRS])


def test_onecycle_endpoints_and_overstepping():
    opt = two_groups()
    scheduler = OneCycle(opt, max_lr=1.0, total_steps=20, pct_start=0.25, div_factor=20.0)
    lrs = lrs_over(scheduler, opt, 20)[:, 0]
    assert lrs[0] == pytest.approx(1.0 / 20)
    assert lrs.max() == pytest.approx(1.0) and int(lrs.argmax()) == 4  # pct_start*total - 1
    assert lrs[19] == pytest.approx(1.0 / 20 / 1e4)
    before = scheduler.get_last_lr()
    with pytest.raises(ValueError, match=r"OneCycle: tried to step 21 times; total_steps is 20"):
        scheduler.step()
    assert scheduler.get_last_lr() == before and scheduler.last_epoch == 20


def test_onecycle_zero_length_warm_phase_goes_straight_to_max_lr():
    # pct_start * total_steps == 1 makes torch divide by zero at step 0; sadl starts at max_lr.
    opt = two_groups()
    scheduler = OneCycle(opt, max_lr=0.5, total_steps=10, pct_start=0.1)
    assert scheduler.get_last_lr() == [0.5, 0.5]
    scheduler.step()
    assert scheduler.get_last_lr()[0] < 0.5


def test_onecycle_ignores_the_optimizer_lr_as_torch():
    opt = two_groups()
    OneCycle(opt, max_lr=0.25, total_steps=10)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.25 / 25, 0.25 / 25], rel=1e-12)


# ---------------------------------------------------------------------------- resume
SCHEDULES = {
    "StepLR": lambda opt: StepLR(opt, step_size=4, gamma=0.7),
    "CosineWithWarmup": lambda opt: CosineWithWarmup(opt, 6, 30, min_lr=1e-4),
    "LinearWarmup": lambda opt: LinearWarmup(opt, 12),
    "MultiStepLR": lambda opt: MultiStepLR(opt, [5, 11, 15], gamma=0.5),
    "OneCycle": lambda opt: OneCycle(opt, max_lr=0.05, total_steps=30, cycle_momentum=True),
}


@pytest.mark.parametrize("optimizer_first", [True, False], ids=["opt-first", "sched-first"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_state_dict_round_trip_mid_training_is_bit_identical(name, optimizer_first):
    problem = PROBLEMS["mlp"]()
    split = GROUP_SPLITS["mlp"]
    make = SCHEDULES[name]

    def build(values):
        params = [sadl.Parameter(v.copy()) for v in values]
        opt = AdamW(make_groups(params, split, [{}, {"lr": 0.01}]), lr=0.02)
        return params, opt

    params, opt = build(problem.init)
    scheduler = make(opt)
    train_sadl(problem, params, opt, 9, scheduler)
    opt_state = opt.state_dict()
    text = json.dumps(scheduler.state_dict())  # plain JSON-able numbers, lists and strings
    saved = [p.data.copy() for p in params]
    expected = train_sadl(problem, params, opt, 8, scheduler)
    expected_lrs = scheduler.get_last_lr()

    resumed, opt2 = build(saved)
    scheduler2 = make(opt2)
    if optimizer_first:
        opt2.load_state_dict(opt_state)
        scheduler2.load_state_dict(json.loads(text))
    else:
        scheduler2.load_state_dict(json.loads(text))
        opt2.load_state_dict(opt_state)
    assert scheduler2.last_epoch == 9
    got = train_sadl(problem, resumed, opt2, 8, scheduler2)
    for a, b in zip(expected, got):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    assert scheduler2.get_last_lr() == expected_lrs
    assert scheduler2.state_dict() == scheduler.state_dict()


def test_state_dict_contents():
    opt = two_groups()
    scheduler = CosineWithWarmup(opt, 2, 10, min_lr=0.001)
    scheduler.step()
    assert scheduler.state_dict() == {
        "scheduler": "CosineWithWarmup",
        "last_epoch": 1,
        "base_lrs": BASE_LRS,
        "last_lr": scheduler.get_last_lr(),
        "warmup_steps": 2,
        "total_steps": 10,
        "min_lr": 0.001,
    }
    state = OneCycle(two_groups(), max_lr=0.1, total_steps=5).state_dict()
    assert state == json.loads(json.dumps(state))


def test_load_state_dict_rejects_a_state_that_does_not_fit():
    opt = two_groups()
    step = StepLR(opt, step_size=2)
    cosine = CosineWithWarmup(two_groups(), 1, 5)
    with pytest.raises(ValueError, match="saved by a CosineWithWarmup, not a StepLR"):
        step.load_state_dict(cosine.state_dict())
    bad = step.state_dict()
    bad["base_lrs"] = [0.1]
    with pytest.raises(ValueError, match=r"StepLR.load_state_dict: base_lrs must be a list of 2"):
        step.load_state_dict(bad)
    bad = step.state_dict()
    bad["gamma"] = -1.0
    with pytest.raises(ValueError, match=r"StepLR: invalid gamma=-1\.0"):
        step.load_state_dict(bad)
    assert step.gamma == 0.1  # a failed load leaves the scheduler as it was
    bad = step.state_dict()
    del bad["step_size"]
    with pytest.raises(ValueError, match=r"missing keys \['step_size'\]"):
        step.load_state_dict(bad)


def test_a_param_group_added_later_is_reported():
    opt = two_groups()
    scheduler = StepLR(opt, step_size=2)
    opt.add_param_group({"params": [sadl.Parameter(np.ones(1))]})
    with pytest.raises(RuntimeError, match="StepLR: the optimizer has 3 param groups"):
        scheduler.step()


# ---------------------------------------------------------------------------- bad arguments
BAD = [
    (lambda o: StepLR(o, step_size=0), r"StepLR: invalid step_size=0 \(need an integer >= 1\)"),
    (lambda o: StepLR(o, step_size=2.5), r"StepLR: invalid step_size=2\.5"),
    (lambda o: StepLR(o, step_size=True), r"StepLR: invalid step_size=True"),
    (lambda o: StepLR(o, 2, gamma=0.0), r"StepLR: invalid gamma=0\.0 \(need a finite number > 0\)"),
    (lambda o: StepLR(o, 2, gamma=float("nan")), r"StepLR: invalid gamma=nan"),
    (lambda o: StepLR(o, 2, gamma=float("inf")), r"StepLR: invalid gamma=inf"),
    (lambda o: OneCycle(o, max_lr=float("inf"), total_steps=5), r"OneCycle: invalid max_lr=inf"),
    (lambda o: LinearWarmup(o, -1), r"LinearWarmup: invalid warmup_steps=-1"),
    (lambda o: CosineWithWarmup(o, -1, 10), r"CosineWithWarmup: invalid warmup_steps=-1"),
    (lambda o: CosineWithWarmup(o, 10, 10), r"total_steps=10 must be greater than warmup_steps=10"),
    (lambda o: CosineWithWarmup(o, 1, 0), r"CosineWithWarmup: invalid total_steps=0"),
    (lambda o: CosineWithWarmup(o, 1, 10, min_lr=-0.1), r"CosineWithWarmup: invalid min_lr=-0\.1"),
    (
        lambda o: CosineWithWarmup(o, 1, 10, min_lr=0.05),
        r"min_lr=0\.05 is above the lr 0\.03 of param group 1",
    ),
    (
        lambda o: OneCycle(o, max_lr=0.0, total_steps=10),
        r"OneCycle: invalid max_lr=0\.0 \(need a finite number > 0\)",
    ),
    (
        lambda o: OneCycle(o, max_lr=[0.1], total_steps=10),
        r"OneCycle: max_lr has 1 values, the optimizer has 2",
    ),
    (
        lambda o: OneCycle(o, max_lr=[0.1, -1.0], total_steps=10),
        r"OneCycle: invalid max_lr\[1\]=-1\.0",
    ),
    (lambda o: OneCycle(o, max_lr=0.1, total_steps=0), r"OneCycle: invalid total_steps=0"),
    (
        lambda o: OneCycle(o, 0.1, 10, pct_start=1.5),
        r"OneCycle: invalid pct_start=1\.5 \(need a finite number in \[0, 1\]\)",
    ),
    (
        lambda o: OneCycle(o, 0.1, 10, anneal_strategy="exp"),
        r"OneCycle: invalid anneal_strategy='exp'",
    ),
    (lambda o: OneCycle(o, 0.1, 10, div_factor=0), r"OneCycle: invalid div_factor=0"),
    (lambda o: OneCycle(o, 0.1, 10, final_div_factor=-1.0), r"OneCycle: invalid final_div_factor"),
    (
        lambda o: OneCycle(o, 0.1, 10, cycle_momentum=True, max_momentum=1.0),
        r"OneCycle: invalid max_momentum=1\.0",
    ),
    (lambda o: OneCycle(o, 0.1, 10, three_phase="yes"), r"OneCycle: invalid three_phase='yes'"),
    (lambda o: MultiStepLR(o, 3), r"MultiStepLR: milestones must be a list of step numbers"),
    (lambda o: MultiStepLR(o, [2, -1]), r"MultiStepLR: invalid milestone=-1"),
    (lambda o: MultiStepLR(o, [2], gamma=0), r"MultiStepLR: invalid gamma=0"),
]


@pytest.mark.parametrize(("build", "match"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_scheduler_arguments_raise_clear_errors(build, match):
    opt = two_groups()
    with pytest.raises(ValueError, match=match):
        build(opt)
    assert [g["lr"] for g in opt.param_groups] == BASE_LRS  # a failed construction changes nothing


def test_scheduler_needs_an_optimizer():
    with pytest.raises(TypeError, match="StepLR: optimizer must be a sadl Optimizer"):
        StepLR([sadl.Parameter(np.ones(1))], step_size=1)


def test_cycle_momentum_needs_momentum_or_betas():
    with pytest.raises(ValueError, match="OneCycle: cycle_momentum=True needs an optimizer with"):
        OneCycle(two_groups(Adagrad), max_lr=0.1, total_steps=10, cycle_momentum=True)
    OneCycle(two_groups(Lion), max_lr=0.1, total_steps=10, cycle_momentum=True)  # Lion has betas


def test_base_class_is_abstract_and_extensible():
    with pytest.raises(TypeError):
        LRScheduler(two_groups())

    class Halving(LRScheduler):
        def lr_at(self, step):
            return [base / 2**step for base in self.base_lrs]

    opt = two_groups()
    scheduler = Halving(opt)
    scheduler.step()
    assert [g["lr"] for g in opt.param_groups] == [b / 2 for b in BASE_LRS]
    assert "last_epoch=1" in repr(scheduler)


@pytest.mark.parametrize("key", ["base_lrs", "last_lr"])
@pytest.mark.parametrize("value", [-0.1, math.inf, None, "0.1"], ids=repr)
def test_restored_lrs_are_held_to_what_the_constructor_accepts(key, value):
    opt = two_groups()
    scheduler = StepLR(opt, step_size=2)
    bad = scheduler.state_dict()
    bad[key] = [bad[key][0], value]
    with pytest.raises(ValueError, match=rf"StepLR.load_state_dict: invalid {key}\[1\]"):
        scheduler.load_state_dict(bad)
    assert [g["lr"] for g in opt.param_groups] == scheduler.get_last_lr()  # left as it was
