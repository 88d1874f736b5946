"""The device matrix for core beyond single ops: autograd, in-place, factories, randomness, data,
modules and core's optimizers on every device, compared with the CPU (float64, 1e-6).

``device`` is "cpu", "strict" (the strict CuPy stand-in) or "cuda" (where a GPU is).
"""

import copy

import numpy as np
import pytest
import sadl
from sadl import Parameter
from sadl.backends import device_of
from sadl.testing import assert_close, project


def f64(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape)


def on(device, array, requires_grad=False):
    return sadl.Tensor(array, device=device, requires_grad=requires_grad)


def test_tensor_basics_stay_on_the_device(device):
    t = on(device, f64(2, 3))
    assert t.device == device
    assert t.device.type == device
    assert (t * 2 + 1).device.type == device
    assert t.sum().device.type == device
    np.testing.assert_array_equal(t.numpy(), f64(2, 3))
    assert t.tolist() == f64(2, 3).tolist()
    assert t[1, 2].item() == f64(2, 3)[1, 2]
    assert float(t.sum()) == pytest.approx(f64(2, 3).sum())
    assert "Tensor(" in repr(t)
    if device != "cpu":
        assert f"device='{device}:0'" in repr(t)
        with pytest.raises(TypeError, match=r"\.numpy\(\)"):
            np.asarray(t)


def test_backward_accumulates_device_gradients_equal_to_the_cpu(device):
    def loss(x, w):
        h = (x @ w).tanh()
        return (h * h).mean() + (w.exp() * x.sum()).sum() + x.max(axis=1).sum()

    x, w = f64(4, 3), f64(3, 5, seed=1)
    grads = {}
    for dev in ("cpu", device):
        xt, wt = on(dev, x, True), on(dev, w, True)
        loss(xt, wt).backward()
        loss(xt, wt).backward()  # accumulates
        grads[dev] = (xt.grad, wt.grad)
    assert_close(grads[device], grads["cpu"], device=device)


def test_sadl_grad_and_create_graph_on_device(device):
    x = on(device, f64(3), True)
    (g,) = sadl.grad((x**3).sum(), x, create_graph=True)
    (gg,) = sadl.grad(g.sum(), x)
    assert_close(g, 3 * f64(3) ** 2, device=device)
    assert_close(gg, 6 * f64(3), device=device)


def test_retained_non_leaf_gradient_lives_on_the_device(device):
    x = on(device, f64(3), True)
    h = (x * 2).retain_grad()
    (h * h).sum().backward()
    assert_close(h.grad, 2 * (2 * f64(3)), device=device)


def test_inplace_ops_and_version_counters_on_device(device):
    t = on(device, np.zeros(4))
    t += 1
    t[0] = 5
    assert_close(t, np.array([5.0, 1, 1, 1]), device=device)
    x = on(device, f64(3), True)
    h = x * 1.0
    v = h[:2]
    y = h.exp().sum()
    with sadl.no_grad():
        v[0] = 10.0  # through a view: the saved output of exp's input changed
    with pytest.raises(RuntimeError, match="in-place"):
        y.backward()
    z = x * 3
    z += x
    z *= z
    z.sum().backward()
    assert_close(x.grad, 32 * f64(3), device=device)


def test_leaf_gradient_is_writable_and_owned(device):
    # The engine copies a gradient it hands to two leaves or that views other memory, so an
    # optimizer may update .grad in place; on a device that must work without flags.writeable.
    a = on(device, f64(3), True)
    b = on(device, f64(3, seed=1), True)
    (a + b).sum().backward()
    a.grad *= 2
    assert_close(b.grad, np.ones(3), device=device)


def test_mixing_devices_is_a_clear_error(device):
    if device == "cpu":
        pytest.skip("needs a second device type")
    a, b = on(device, [1.0]), sadl.tensor([1.0])
    with pytest.raises(RuntimeError, match="one device"):
        a + b


def test_two_devices_of_one_type_do_not_mix():
    a = sadl.tensor([1.0], device="strict:0")
    b = sadl.tensor([1.0], device="strict:1")
    assert b.device == "strict:1"
    with pytest.raises(RuntimeError, match="one device"):
        a + b
    with pytest.raises(RuntimeError, match="not available"):
        sadl.tensor([1.0], device="strict:7")


def test_to_is_differentiable_across_devices(device):
    x = sadl.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x.to(device) * 3).to("cpu").sum()
    y.backward()
    np.testing.assert_allclose(x.grad, [3.0, 3.0])
    assert isinstance(x.grad, np.ndarray)
    d = on(device, np.array([1.0, 2.0]), True)
    (d.to("cpu") ** 2).sum().backward()
    assert_close(d.grad, np.array([2.0, 4.0]), device=device)


def test_factories_make_tensors_on_the_device(device):
    kwargs = {"dtype": np.float64, "device": device}
    made = [
        sadl.zeros(2, 3, **kwargs),
        sadl.ones(2, **kwargs),
        sadl.empty(2, **kwargs),
        sadl.full((2,), 1.5, **kwargs),
        sadl.eye(3, **kwargs),
        sadl.arange(4, **kwargs),
        sadl.linspace(0, 1, 5, **kwargs),
        sadl.tensor([1.0, 2.0], **kwargs),
    ]
    for t in made:
        assert t.device.type == device
    base = on(device, f64(2, 2))
    for t in (sadl.zeros_like(base), sadl.ones_like(base), sadl.tensor(base.data)):
        assert t.device.type == device and t.shape == (2, 2)
    copied = sadl.tensor(base.data)
    copied += 1
    assert_close(base, f64(2, 2), device=device)  # tensor() copies device data too


def test_random_factories_draw_on_the_device_reproducibly(device):
    sadl.manual_seed(7)
    a = (sadl.rand(50, device=device), sadl.randn(50, device=device))
    b = sadl.randint(0, 5, (50,), device=device)
    sadl.manual_seed(7)
    c = (sadl.rand(50, device=device), sadl.randn(50, device=device))
    d = sadl.randint(0, 5, (50,), device=device)
    for t in (*a, b):
        assert t.device.type == device
    assert_close(list(c), list(a), device=device, rtol=0, atol=0)
    assert_close(d, b, device=device)
    u = a[0].numpy()
    assert u.min() >= 0 and u.max() < 1 and u.dtype == np.float32
    # An explicit NumPy generator draws on the host, then the values move: same as the CPU's.
    e = sadl.rand(5, device=device, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(e.numpy(), sadl.rand(5, rng=np.random.default_rng(3)).numpy())


def test_each_device_type_draws_its_own_stream(device):
    if device == "cpu":
        pytest.skip("compares a device stream with the CPU's")
    sadl.manual_seed(11)
    host = sadl.rand(100).numpy()
    sadl.manual_seed(11)
    there = sadl.rand(100, device=device).numpy()
    assert not np.array_equal(host, there)  # documented: same seed, another generator
    assert sadl.random.generator(device) is sadl.random.generator(device)


class Affine(sadl.Module):
    def __init__(self):
        super().__init__()
        self.weight = Parameter(f64(3, 2, seed=2))
        self.bias = Parameter(f64(3, seed=3))
        self.register_buffer("steps", sadl.tensor(np.zeros(1)))

    def forward(self, x):
        return (x @ self.weight.T + self.bias).relu()


def test_module_to_state_dict_and_load_across_devices(device):
    cpu = Affine()
    dev = copy.deepcopy(cpu).to(device)
    assert all(p.device.type == device for p in dev.parameters())
    assert dev.steps.device.type == device
    x = f64(5, 2, seed=4)
    out_cpu, out_dev = cpu(sadl.tensor(x)), dev(on(device, x))
    assert_close(out_dev, out_cpu, device=device)
    project(out_cpu).backward()
    project(out_dev).backward()
    assert_close([p.grad for p in dev.parameters()], [p.grad for p in cpu.parameters()])
    # A CPU state dict loads into the device model, a device one into the CPU model.
    fresh = Affine().to(device)
    with sadl.no_grad():
        for p in fresh.parameters():
            p *= 0
    fresh.load_state_dict(cpu.state_dict())
    assert_close(fresh.state_dict(), cpu.state_dict(), device=device)
    back = Affine()
    back.load_state_dict(dev.state_dict())
    assert_close(back.state_dict(), cpu.state_dict(), device="cpu")
    dev.zero_grad()
    assert all(p.grad is None or not p.grad.any() for p in dev.parameters())


OPTIMIZERS = [
    (sadl.SGD, {"lr": 0.1}),
    (sadl.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (sadl.SGD, {"lr": 0.1, "momentum": 0.5, "dampening": 0.1}),
    (sadl.Adam, {"lr": 0.05}),
    (sadl.Adam, {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True}),
]


def run_steps(cls, kwargs, device, steps=4):
    params = [Parameter(f64(3, 2, seed=5), device=device), Parameter(f64(2, seed=6), device=device)]
    opt = cls(params, **kwargs)
    x = on(device, f64(4, 3, seed=7))
    for _ in range(steps):
        opt.zero_grad()
        ((x @ params[0] + params[1]).tanh() ** 2).sum().backward()
        opt.step()
    return params, opt


@pytest.mark.parametrize(("cls", "kwargs"), OPTIMIZERS, ids=lambda v: getattr(v, "__name__", ""))
def test_core_optimizer_steps_on_device_match_the_cpu(cls, kwargs, device):
    cpu_params, cpu_opt = run_steps(cls, kwargs, "cpu")
    dev_params, dev_opt = run_steps(cls, kwargs, device)
    assert_close(dev_params, cpu_params, device=device)
    for p_cpu, p_dev in zip(cpu_params, dev_params):
        state_cpu, state_dev = cpu_opt.state[p_cpu], dev_opt.state[p_dev]
        assert_close(state_dev, state_cpu, device=device)
    # A saved state resumes on the device (loaded where the parameters are).
    saved = cpu_opt.state_dict()
    resumed_params = [Parameter(p.data, device=device) for p in cpu_params]
    resumed = cls(resumed_params, **kwargs)
    resumed.load_state_dict(saved)
    for p in resumed_params:
        for value in resumed.state[p].values():
            if hasattr(value, "shape"):
                assert device_of(value).type == device


def test_optimizer_backward_seed_api_on_device(device):
    p = Parameter(on(device, f64(3)).data)
    opt = sadl.SGD([p], lr=0.5)
    opt.backward((p * p).sum())
    opt.step()
    assert_close(p, f64(3) * 0.0, device=device)


def test_check_plugins_command_runs_the_device_battery(device, capsys):
    from sadl.cli import main

    assert main(["check-plugins", "--plugin", "sadl", "--device", device]) == 0
    assert ", 0 failed" in capsys.readouterr().out
    assert main(["check-plugins", "--device", "tpu"]) == 2
    assert "unknown device type 'tpu'" in capsys.readouterr().err
