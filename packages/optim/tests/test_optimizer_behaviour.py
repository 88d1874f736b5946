"""Optimizers: in-place float32 updates, bit-identical resume from a state_dict, clear errors."""

import copy
import math

import numpy as np
import pytest
import sadl
from optim_problems import PROBLEMS, sadl_params
from sadl_optim import Adagrad, AdamW, Lion, RMSprop

OURS = [
    (AdamW, {"lr": 0.02}),
    (AdamW, {"lr": 0.02, "amsgrad": True, "weight_decay": 0.1}),
    (RMSprop, {"lr": 0.01}),
    (RMSprop, {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.01}),
    (Adagrad, {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1}),
    (Lion, {"lr": 1e-3, "weight_decay": 0.1}),
]
CORE = [
    (sadl.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    (sadl.Adam, {"lr": 0.02, "amsgrad": True}),
]


def case_id(case):
    return case[0].__name__ + "-" + "-".join(f"{k}={v}" for k, v in case[1].items())


def scalar_problem_params(dtype=np.float64, with_scalar=True):
    """The MLP's parameters plus (``with_scalar``) a 0-d parameter ``s`` pulled towards 1."""
    problem = PROBLEMS["mlp"]()
    params = sadl_params(problem, dtype)
    if with_scalar:
        params.append(sadl.Parameter(np.array(0.25, dtype)))
    consts = [sadl.tensor(c.astype(dtype)) for c in problem.consts]

    def loss(ps):
        value = problem.loss(ps[:4], consts)
        return value + ((ps[4] - 1.0) ** 2) * 0.5 if len(ps) > 4 else value

    return params, loss


def run(params, loss, opt, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss(params).backward()
        opt.step()


@pytest.mark.parametrize("case", OURS + CORE, ids=case_id)
def test_float32_stays_float32_and_updates_in_place(case):
    cls, kwargs = case
    # Core's SGD and Adam mishandle 0-d parameters (see test_core_0d_bug_is_worked_around_here).
    params, loss = scalar_problem_params(np.float32, with_scalar=cls not in (sadl.SGD, sadl.Adam))
    arrays = [p.data for p in params]
    before = [a.copy() for a in arrays]
    opt = cls(params, **kwargs)
    run(params, loss, opt, 3)
    for p, a, b in zip(params, arrays, before):
        assert p.data is a, "the update must happen in place on param.data"
        assert p.dtype == np.float32
        assert not np.array_equal(a, b)
    for state in opt.state.values():
        for key, value in state.items():
            if hasattr(value, "dtype"):
                assert value.dtype == np.float32, key


@pytest.mark.parametrize("case", OURS + CORE, ids=case_id)
def test_state_dict_round_trip_gives_bit_identical_steps(case):
    cls, kwargs = case
    params, loss = scalar_problem_params(with_scalar=cls not in (sadl.SGD, sadl.Adam))
    opt = cls([{"params": params[:2]}, {"params": params[2:], "lr": kwargs["lr"] / 2}], **kwargs)
    run(params, loss, opt, 7)
    saved = opt.state_dict()
    saved_params = [p.data.copy() for p in params]
    run(params, loss, opt, 5)
    expected = [p.data.copy() for p in params]

    resumed = [sadl.Parameter(d.copy()) for d in saved_params]
    opt2 = cls([{"params": resumed[:2]}, {"params": resumed[2:]}], **kwargs)
    opt2.load_state_dict(copy.deepcopy(saved))
    assert [g["lr"] for g in opt2.param_groups] == [kwargs["lr"], kwargs["lr"] / 2]
    run(resumed, loss, opt2, 5)
    for a, b in zip(expected, resumed):
        assert np.array_equal(a, b.data)


def test_state_dict_is_a_snapshot():
    params, loss = scalar_problem_params()
    opt = AdamW(params, lr=0.02)
    run(params, loss, opt, 2)
    saved = opt.state_dict()
    frozen = copy.deepcopy(saved)
    run(params, loss, opt, 2)
    for key, state in saved["state"].items():
        for name, value in state.items():
            assert np.array_equal(value, frozen["state"][key][name]), name


def test_state_layout_is_torch_like():
    params, loss = scalar_problem_params()
    opt = RMSprop(params, lr=0.01, momentum=0.9, centered=True)
    run(params, loss, opt, 1)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == list(range(len(params)))
    assert set(sd["state"][0]) == {"step", "square_avg", "grad_avg", "momentum_buffer"}
    assert sd["param_groups"][0]["params"] == list(range(len(params)))


def test_core_0d_bug_is_worked_around_here():
    # Core's Optimizer.load_state_dict turns 0-d state arrays into Python floats, so in-place
    # updates of that state are lost (see the package report); sadl-optim's optimizers turn them
    # back into arrays of the parameter's dtype.
    p = sadl.Parameter(np.array(2.0, np.float32))
    opt = AdamW([p], lr=0.1)
    (p * p).backward()
    opt.step()
    q = sadl.Parameter(p.data.copy())
    opt2 = AdamW([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    for o, t in ((opt, p), (opt2, q)):
        for _ in range(3):
            o.zero_grad()
            (t * t).backward()
            o.step()
    assert np.array_equal(p.data, q.data)
    assert opt2.state[q]["exp_avg"].dtype == np.float32


def test_parameters_without_grad_are_left_alone():
    a = sadl.Parameter(np.ones(3))
    b = sadl.Parameter(np.ones(3))
    opt = AdamW([a, b], lr=0.1)
    (a * a).sum().backward()
    opt.step()
    assert np.array_equal(b.data, np.ones(3)) and b not in opt.state


BAD = [
    (AdamW, {"lr": -1.0}, r"AdamW: invalid learning rate lr=-1\.0"),
    (AdamW, {"betas": (0.9, 1.0)}, r"AdamW: invalid betas=\(0\.9, 1\.0\) \(need two numbers"),
    (AdamW, {"betas": (-0.1, 0.9)}, r"AdamW: invalid betas"),
    (AdamW, {"betas": 0.9}, r"AdamW: invalid betas=0\.9"),
    (AdamW, {"betas": (0.9, 0.99, 0.999)}, r"AdamW: invalid betas"),
    (AdamW, {"eps": -1e-8}, r"AdamW: invalid eps=-1e-08 \(need a finite number >= 0\)"),
    (
        AdamW,
        {"weight_decay": -0.1},
        r"AdamW: invalid weight_decay=-0\.1 \(need a finite number >= 0\)",
    ),
    (AdamW, {"amsgrad": "yes"}, r"AdamW: invalid amsgrad='yes' \(need True or False\)"),
    (RMSprop, {"lr": -0.01}, r"RMSprop: invalid learning rate"),
    (RMSprop, {"alpha": 1.5}, r"RMSprop: invalid alpha=1\.5 \(need a finite number in \[0, 1\)\)"),
    (RMSprop, {"alpha": -0.1}, r"RMSprop: invalid alpha"),
    (RMSprop, {"momentum": -0.5}, r"RMSprop: invalid momentum=-0\.5 \(need a finite number >= 0\)"),
    (RMSprop, {"eps": -1.0}, r"RMSprop: invalid eps"),
    (RMSprop, {"momentum": float("inf")}, r"RMSprop: invalid momentum=inf"),
    (RMSprop, {"weight_decay": -1.0}, r"RMSprop: invalid weight_decay"),
    (RMSprop, {"centered": 1}, r"RMSprop: invalid centered=1 \(need True or False\)"),
    (Adagrad, {"lr": -0.1}, r"Adagrad: invalid learning rate"),
    (Adagrad, {"lr_decay": -0.1}, r"Adagrad: invalid lr_decay=-0\.1"),
    (Adagrad, {"initial_accumulator_value": -1.0}, r"Adagrad: invalid initial_accumulator_value"),
    (Adagrad, {"eps": -1e-10}, r"Adagrad: invalid eps"),
    (Adagrad, {"weight_decay": -1e-2}, r"Adagrad: invalid weight_decay"),
    (Lion, {"lr": -1e-4}, r"Lion: invalid learning rate"),
    (Lion, {"betas": (1.0, 0.99)}, r"Lion: invalid betas"),
    (Lion, {"betas": (0.9, float("nan"))}, r"Lion: invalid betas"),
    (Lion, {"weight_decay": -1.0}, r"Lion: invalid weight_decay"),
    (sadl.SGD, {"lr": -0.1}, r"SGD: invalid learning rate"),
    (sadl.Adam, {"betas": (0.9, 1.5)}, r"Adam: invalid betas"),
]


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"), BAD, ids=[f"{c.__name__}-{next(iter(k))}" for c, k, _ in BAD]
)
def test_bad_hyperparameters_raise_clear_errors(cls, kwargs, match):
    p = sadl.Parameter(np.ones(3))
    with pytest.raises(ValueError, match=match):
        cls([p], **kwargs)
    # The same value given in a param group is checked too.
    with pytest.raises(ValueError, match=match):
        cls([{"params": [p], **kwargs}])


@pytest.mark.parametrize("cls", [AdamW, RMSprop, Adagrad, Lion])
def test_unknown_param_group_keys_are_rejected(cls):
    p = sadl.Parameter(np.ones(3))
    with pytest.raises(ValueError, match=rf"{cls.__name__}: unknown param group keys \['lrr'\]"):
        cls([{"params": [p], "lrr": 0.1}])


def test_a_key_of_another_optimizer_is_unknown():
    p = sadl.Parameter(np.ones(3))
    with pytest.raises(ValueError, match=r"Lion: unknown param group keys \['eps'\]"):
        Lion([{"params": [p], "eps": 1e-8}])
    with pytest.raises(ValueError, match=r"Adagrad: unknown param group keys \['momentum'\]"):
        Adagrad([{"params": [p], "momentum": 0.9}])


def test_hyperparameters_are_normalized():
    p = sadl.Parameter(np.ones(3))
    opt = AdamW([p], betas=[np.float64(0.8), 0.9], amsgrad=np.bool_(True))
    assert opt.param_groups[0]["betas"] == (0.8, 0.9)
    assert opt.param_groups[0]["amsgrad"] is True


TAMPERED = [
    (cls, value, key)
    for cls in (Adagrad, AdamW, Lion, RMSprop)
    for value, key in [(None, "lr"), ("fast", "lr"), (None, "weight_decay"), (math.nan, "eps")]
    if key != "eps" or cls is not Lion  # Lion has no eps
]


@pytest.mark.parametrize(("cls", "value", "key"), TAMPERED, ids=repr)
def test_a_restored_hyperparameter_is_held_to_what_the_constructor_accepts(cls, value, key):
    params = [sadl.Parameter(np.ones(3))]
    optimizer = cls(params, lr=0.1)
    with pytest.raises(ValueError, match=f"invalid .*{key}"):
        cls(params, **{"lr": 0.1, key: value})
    state = optimizer.state_dict()
    state["param_groups"][0][key] = value
    with pytest.raises(ValueError, match=f"param group 0: .*invalid .*{key}"):
        optimizer.load_state_dict(state)
    assert optimizer.param_groups[0]["lr"] == 0.1


@pytest.mark.parametrize("cls", [AdamW, RMSprop], ids=lambda c: c.__name__)
def test_a_restored_flag_stays_a_bool(cls):
    optimizer = cls([sadl.Parameter(np.ones(3))], lr=0.1)
    flag = "amsgrad" if cls is AdamW else "centered"
    state = optimizer.state_dict()
    state["param_groups"][0][flag] = "yes"
    with pytest.raises(ValueError, match=f"invalid {flag}='yes'"):
        optimizer.load_state_dict(state)
