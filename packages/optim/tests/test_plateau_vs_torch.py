"""ReduceLROnPlateau: the lrs equal torch.optim.lr_scheduler.ReduceLROnPlateau's step for step
over a fixed metric sequence, in every mode; its state resumes exactly; bad arguments say so."""

import json
import math

import numpy as np
import pytest
import sadl
from sadl_optim import AdamW, ReduceLROnPlateau

#: A metric that improves, stalls, gets worse and improves again (plus ties and tiny gains).
METRICS = [
    *[1.0, 0.8, 0.7, 0.7, 0.69995, 0.7, 0.71, 0.72, 0.65, 0.65, 0.66, 0.64, 0.6401],
    *[0.7, 0.8, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49, 0.49, 0.49, 0.49, 0.49, 0.49, 0.3, 0.3],
    *[0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3],
]

CASES = [
    {},
    {"patience": 2},
    {"patience": 1, "factor": 0.5, "cooldown": 2},
    {"patience": 0, "factor": 0.3, "min_lr": 0.002},
    {"patience": 0, "factor": 0.5, "min_lr": [0.01, 0.0]},
    {"mode": "max", "patience": 1, "factor": 0.5},
    {"patience": 1, "threshold": 0.05, "threshold_mode": "abs"},
    {"mode": "max", "patience": 2, "threshold": 0.1, "threshold_mode": "abs", "cooldown": 1},
    {"patience": 0, "factor": 0.9, "eps": 0.005},  # small changes of group 1 are skipped
]


def two_groups(torch=None):
    lrs = [0.1, 0.03]
    if torch is None:
        params = [sadl.Parameter(np.ones(2)), sadl.Parameter(np.ones(3))]
        return sadl.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)])
    params = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    return torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)])


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_lrs_equal_torch_step_by_step(kwargs):
    torch = pytest.importorskip("torch", reason="torch is the reference for this parity test")
    opt, topt = two_groups(), two_groups(torch)
    scheduler = ReduceLROnPlateau(opt, **kwargs)
    tscheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    metrics = [-m for m in METRICS] if kwargs.get("mode") == "max" else METRICS
    got, want = [], []
    for value in metrics:
        opt.step()
        topt.step()
        scheduler.step(value)
        tscheduler.step(value)
        got.append([g["lr"] for g in opt.param_groups])
        want.append([g["lr"] for g in topt.param_groups])
        assert scheduler.get_last_lr() == got[-1]
        assert scheduler.num_bad_epochs == tscheduler.num_bad_epochs
        assert scheduler.cooldown_counter == tscheduler.cooldown_counter
        assert scheduler.best == tscheduler.best
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
    assert len({lr for lr, _ in got}) > 1, "the metric should have lowered the lr"


def test_step_takes_a_tensor_metric_and_resumes_exactly_from_json():
    params = [sadl.Parameter(np.ones(2))]
    opt = AdamW(params, lr=0.1)
    scheduler = ReduceLROnPlateau(opt, patience=1, cooldown=1, factor=0.5)
    for value in METRICS[:9]:
        scheduler.step(sadl.tensor(value))  # a 0-d loss tensor works
    text = json.dumps(scheduler.state_dict())
    expected = []
    for value in METRICS[9:]:
        scheduler.step(value)
        expected.append(scheduler.get_last_lr())
    opt2 = AdamW([sadl.Parameter(np.ones(2))], lr=0.1)
    resumed = ReduceLROnPlateau(opt2, patience=1, cooldown=1, factor=0.5)
    resumed.load_state_dict(json.loads(text))
    assert opt2.param_groups[0]["lr"] == json.loads(text)["last_lr"][0]
    got = []
    for value in METRICS[9:]:
        resumed.step(value)
        got.append(resumed.get_last_lr())
    assert got == expected
    assert resumed.state_dict() == scheduler.state_dict()


def test_a_fresh_state_with_an_infinite_best_round_trips():
    opt = two_groups()
    state = ReduceLROnPlateau(opt).state_dict()
    assert state["best"] == "inf" and json.loads(json.dumps(state)) == state
    again = ReduceLROnPlateau(two_groups())
    again.load_state_dict(state)
    assert again.best == math.inf


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda o: ReduceLROnPlateau(o, mode="lowest"), r"mode must be 'min' or 'max'"),
        (lambda o: ReduceLROnPlateau(o, factor=1.0), r"invalid factor=1\.0"),
        (lambda o: ReduceLROnPlateau(o, patience=-1), r"invalid patience=-1"),
        (lambda o: ReduceLROnPlateau(o, threshold_mode="x"), r"threshold_mode must be 'rel' or"),
        (lambda o: ReduceLROnPlateau(o, min_lr=[0.1]), r"expected 2 min_lr values"),
        (lambda o: ReduceLROnPlateau(o, cooldown=1.5), r"invalid cooldown=1\.5"),
    ],
)
def test_bad_arguments_raise_clear_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build(two_groups())


def test_step_needs_the_metric():
    scheduler = ReduceLROnPlateau(two_groups())
    with pytest.raises(TypeError, match="pass the metric to watch"):
        scheduler.step(None)
    with pytest.raises(TypeError, match="optimizer must be a sadl Optimizer"):
        ReduceLROnPlateau("sgd")
    with pytest.raises(ValueError, match="not a ReduceLROnPlateau state"):
        scheduler.load_state_dict({"best": 1.0})
