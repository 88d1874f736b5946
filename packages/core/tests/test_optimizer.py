"""Core's Optimizer base, SGD and Adam (torch parity lives in sadl-optim's tests as well)."""

import numpy as np
import pytest
import sadl
from sadl import Parameter


def quadratic_params():
    return [Parameter(np.array([1.0, -2.0, 3.0])), Parameter(np.array([[0.5, -0.5]]))]


def loss_of(params):
    a, b = params
    return (a**2).sum() * 0.5 + ((b - 1.0) ** 2).sum() + (a[0] * b[0, 1])


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (sadl.SGD, {"lr": 0.1}),
        (sadl.SGD, {"lr": 0.1, "momentum": 0.9}),
        (sadl.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
        (sadl.Adam, {"lr": 0.05}),
        (sadl.Adam, {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True}),
    ],
)
def test_trajectory_matches_torch(cls, kwargs):
    torch = pytest.importorskip("torch")
    params = quadratic_params()
    tparams = [torch.tensor(p.data.copy(), requires_grad=True) for p in params]
    opt = cls(params, **kwargs)
    topt = getattr(torch.optim, cls.__name__)(tparams, **kwargs)
    for _ in range(50):
        opt.zero_grad()
        loss_of(params).backward()
        opt.step()
        topt.zero_grad()
        loss_of(tparams).backward()
        topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("cls", [sadl.SGD, sadl.Adam])
def test_updates_in_place_and_keep_float32(cls):
    p = Parameter(np.ones(3, np.float32))
    data = p.data
    opt = cls([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    assert p.data is data and p.dtype == np.float32
    assert all(v.dtype == np.float32 for v in opt.state[p].values() if hasattr(v, "dtype"))


def test_state_dict_resume_is_bit_identical():
    params = quadratic_params()
    opt = sadl.Adam(params, lr=0.05)
    for _ in range(5):
        opt.zero_grad()
        loss_of(params).backward()
        opt.step()
    saved = opt.state_dict()
    saved_params = [p.data.copy() for p in params]
    for _ in range(3):
        opt.zero_grad()
        loss_of(params).backward()
        opt.step()
    expected = [p.data.copy() for p in params]

    resumed = [Parameter(d.copy()) for d in saved_params]
    opt2 = sadl.Adam(resumed, lr=0.05)
    opt2.load_state_dict(saved)
    for _ in range(3):
        opt2.zero_grad()
        loss_of(resumed).backward()
        opt2.step()
    for a, b in zip(expected, resumed):
        np.testing.assert_array_equal(a, b.data)


def test_param_groups_and_errors():
    a, b = quadratic_params()
    opt = sadl.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    with pytest.raises(ValueError, match="learning rate lr=-1"):
        sadl.SGD([a], lr=-1)
    with pytest.raises(ValueError, match="betas"):
        sadl.Adam([a], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="unknown param group keys"):
        sadl.SGD([{"params": [a], "lrr": 0.1}], lr=0.1)
    with pytest.raises(ValueError, match="more than one param group"):
        sadl.SGD([{"params": [a]}, {"params": [a]}], lr=0.1)
    with pytest.raises(ValueError, match="empty"):
        sadl.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="nesterov"):
        sadl.SGD([a], lr=0.1, nesterov=True)


def test_backward_seed_api_and_closure():
    p = Parameter(np.array([2.0]))
    opt = sadl.SGD([p], lr=0.25)
    loss = (p * p).sum()
    opt.backward(loss)
    opt.step()
    np.testing.assert_allclose(p.data, [1.0])

    def closure():
        opt.zero_grad()
        value = (p * p).sum()
        value.backward()
        return value

    assert float(opt.step(closure).data) == 1.0


def test_zero_dim_parameter_gets_an_array_gradient_and_working_momentum():
    p = Parameter(np.array(2.0))
    opt = sadl.SGD([p], lr=0.1, momentum=0.9)
    for _ in range(5):
        opt.zero_grad()
        (p * p).backward()
        opt.step()
    assert isinstance(p.grad, np.ndarray)
    # hand-computed momentum trajectory (torch.optim.SGD gives the same -1.16084)
    np.testing.assert_allclose(p.data, -1.16084, rtol=1e-12)


def test_zero_dim_state_survives_a_state_dict_round_trip():
    p = Parameter(np.array(2.0, np.float32))
    opt = sadl.Adam([p], lr=0.1)
    (p * p).backward()
    opt.step()
    q = Parameter(p.data.copy())
    opt2 = sadl.Adam([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    for o, t in ((opt, p), (opt2, q)):
        for _ in range(3):
            o.zero_grad()
            (t * t).backward()
            o.step()
    np.testing.assert_array_equal(p.data, q.data)
    assert opt2.state[q]["exp_avg"].dtype == np.float32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": float("inf")}, "lr=inf"),
        ({"lr": True}, "lr=True"),
        ({"betas": 0.9}, "pair"),
        ({"eps": -1.0}, "eps"),
    ],
)
def test_hyperparameter_checks(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sadl.Adam(quadratic_params(), **kwargs)
    sadl.Adam(quadratic_params(), lr=np.float32(0.1))  # NumPy numbers are fine


def test_a_parameter_twice_in_one_group_says_it_appears_twice():
    a, b = quadratic_params()
    with pytest.raises(ValueError, match=r"parameter 2 .* appears twice in one param group"):
        sadl.SGD([a, b, a], lr=0.1)
    with pytest.raises(ValueError, match=r"appears twice in one param group \(also as parameter 0"):
        sadl.Adam([{"params": [a, a]}])


TAMPERED = [
    (sadl.SGD, "lr", None),
    (sadl.SGD, "lr", "0.1"),
    (sadl.SGD, "momentum", float("nan")),
    (sadl.SGD, "momentum", True),
    (sadl.SGD, "nesterov", None),
    (sadl.SGD, "dampening", "x"),
    (sadl.SGD, "weight_decay", None),
    (sadl.Adam, "lr", None),
    (sadl.Adam, "betas", None),
    (sadl.Adam, "eps", None),
    (sadl.Adam, "amsgrad", "yes"),
    (sadl.Adam, "amsgrad", None),
    (sadl.Adam, "weight_decay", float("inf")),
]


@pytest.mark.parametrize(("cls", "key", "value"), TAMPERED, ids=lambda v: repr(v)[:20])
def test_a_restored_hyperparameter_is_held_to_what_the_constructor_accepts(cls, key, value):
    a, b = quadratic_params()
    with pytest.raises(ValueError, match=f"invalid .*{key}"):
        cls([a], **{"lr": 0.1, key: value})
    optimizer = cls([a], lr=0.1)
    state = optimizer.state_dict()
    state["param_groups"][0][key] = value
    with pytest.raises(ValueError, match=f"load_state_dict: param group 0: .*invalid .*{key}"):
        optimizer.load_state_dict(state)
    assert optimizer.param_groups[0]["lr"] == 0.1  # left as it was
