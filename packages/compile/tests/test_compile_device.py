"""sadl.compile on a device: replays match eager on the same device, bit for bit.

``device`` is the device matrix's argument: "cpu", "strict" (the strict CuPy stand-in, a test-only
backend whose arrays refuse what CuPy's refuse) and "cuda" where a GPU is. A trace records the
backend's own functions (``cupy.matmul`` for ``np.matmul`` on a CuPy array), allocates its planned
buffers on the device, draws from the device's generator and records host/device copies as calls.
"""

import re

import numpy as np
import pytest
import sadl
from compile_models import (
    MLP,
    assert_draws_replay_as_in_eager,
    assert_prod_guard_falls_back_once,
    batches,
    cross_entropy,
)
from sadl import CompileError


def device_mlp():
    """The compile tests' MLP, small, with a dropout mask drawn where its hidden layer is."""
    return MLP(n_in=6, n_hidden=8, n_out=3, dropout=True)


def data(n):
    return batches(n, batch=5, n_in=6, n_out=3)


def host(array):
    """A device array's values on the host (an explicit copy)."""
    return sadl.backends.to_device(array, "cpu")


def test_a_compiled_forward_is_eager_on_the_device(device):
    model = device_mlp().to(device)
    compiled = sadl.compile(lambda x: model(x).detach(), fusion=False)
    for x, _ in data(3):
        x = sadl.tensor(x, device=device)
        sadl.manual_seed(3)
        expected = model(x).detach()
        sadl.manual_seed(3)
        got = compiled(x)
        assert got.device == expected.device and got.device.type == device
        assert type(got.data) is type(expected.data)
        assert np.array_equal(got.numpy(), expected.numpy())
    assert compiled.stats.traces == 1 and compiled.stats.replays == 2
    if device != "cpu":
        assert f"@{device}:0" in str(compiled.graph)


def train(device, make_optimizer, compiled, fusion):
    """Four training steps on ``device``: (losses, model, optimizer, the step function)."""
    sadl.manual_seed(0)
    model = device_mlp().to(device)
    opt = make_optimizer(model.parameters())

    def step(x, y):
        loss = cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = sadl.compile(step, fusion=fusion) if compiled else step
    losses = []
    for x, y in data(4):
        loss = run(sadl.tensor(x, device=device), sadl.tensor(y, device=device))
        assert loss.device.type == device
        losses.append(loss.numpy().item())
    return losses, model, opt, run


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda params: sadl.SGD(params, lr=0.1, momentum=0.9),
        lambda params: sadl.Adam(params, lr=0.01, weight_decay=0.01),
    ],
    ids=["SGD", "Adam"],
)
@pytest.mark.parametrize("fusion", [False, True])
def test_training_steps_are_eager_on_the_device(device, make_optimizer, fusion):
    runs = [train(device, make_optimizer, compiled, fusion) for compiled in (False, True)]
    (eager, model_e, opt_e, _), (replayed, model_c, opt_c, run) = runs
    assert replayed == eager
    for p, q in zip(model_e.parameters(), model_c.parameters()):
        assert q.device.type == device
        assert np.array_equal(p.numpy(), q.numpy())
        assert np.array_equal(host(p.grad), host(q.grad))
        for key, value in opt_e.state[p].items():
            other = opt_c.state[q][key]
            if sadl.backends.is_array(value):
                assert np.array_equal(host(value), host(other)), key
            else:
                assert value == other, key
    assert run.stats.traces == 1 and run.stats.replays == 3 and run.stats.fallbacks == 0
    assert "(flat buffers)" in str(run.graph)


def test_random_draws_are_fresh_from_the_device_generator_as_in_eager(device):
    def noisy(x):
        keep = sadl.rand(*x.shape, device=x.device) >= 0.5  # the device's generator
        return x * keep.astype(np.float32) * 2.0

    assert_draws_replay_as_in_eager(noisy, sadl.ones(64, device=device))


def test_a_changed_device_retraces():
    double = sadl.compile(lambda x: (x * 2 + 1).detach())
    values = np.arange(4, dtype=np.float32)
    for where in ("cpu", "strict", "strict:1", "strict", "cpu"):
        out = double(sadl.tensor(values, device=where))
        assert out.device == sadl.backends.parse_device(where)
        assert np.array_equal(out.numpy(), values * 2 + 1)
    assert double.stats.traces == 3 and double.stats.replays == 2
    assert double.stats.reasons == ["first call", "a new signature", "a new signature"]


def test_host_device_copies_inside_the_function_behave_as_in_eager(device):
    host = np.full(4, 3.0, np.float32)

    def mixed(x):
        y = x.to(device)  # a host-to-device copy of the argument
        z = sadl.tensor(host, device=device)  # a copy of a host array read at each call
        total = (y * z).sum()
        return total.to("cpu").detach(), (y + 1).detach(), sadl.tensor(y.numpy() * 2)

    compiled = sadl.compile(mixed)
    for i in range(3):
        host[0] = i  # the host array changes between calls: each call copies it anew
        x = sadl.tensor(np.arange(4, dtype=np.float32) + i)
        got, expected = compiled(x), mixed(x)
        for g, e in zip(got, expected):
            assert g.device == e.device
            assert np.array_equal(g.numpy(), e.numpy())
    assert [t.device.type for t in got] == ["cpu", device, "cpu"]
    assert compiled.stats.traces == 1 and compiled.stats.replays == 2
    if device != "cpu":
        graph = str(compiled.graph)
        assert "from_host(" in graph and "to_host(" in graph


def test_a_copy_between_two_devices_is_recorded():
    compiled = sadl.compile(lambda x: ((x * 2).to("strict:1") + 1).detach())
    for i in range(3):
        x = sadl.tensor(np.arange(3.0) + i, device="strict")
        got = compiled(x)
        assert str(got.device) == "strict:1"
        assert np.array_equal(got.numpy(), (np.arange(3.0) + i) * 2 + 1)
    assert compiled.stats.traces == 1
    assert re.search(r"from_host\(%\d+, 1\)", str(compiled.graph))


def test_implicit_host_conversion_of_a_device_array_is_refused_as_in_eager():
    x = sadl.tensor(np.arange(3.0), device="strict")
    with pytest.raises(TypeError, match="Implicit conversion") as eager:
        np.asarray(x.data)
    compiled = sadl.compile(lambda t: sadl.tensor(np.asarray(t.data) * 2))
    with pytest.raises(TypeError, match="Implicit conversion") as traced:
        compiled(x)
    assert str(traced.value) == str(eager.value)


def test_errors_on_a_device_are_the_eager_ones_or_name_the_line():
    on_device = sadl.ones(3, device="strict")
    with pytest.raises(CompileError, match=r"\.item\(\).*test_compile_device\.py:\d+"):
        sadl.compile(lambda t: (t.sum() * 2).item())(on_device)
    with pytest.raises(RuntimeError, match="expected all tensors on one device") as eager:
        sadl.ones(3) + on_device
    with pytest.raises(RuntimeError, match="expected all tensors on one device") as traced:
        sadl.compile(lambda a, b: (a + b).detach())(sadl.ones(3), on_device)
    assert str(traced.value) == str(eager.value)


def test_a_branch_on_a_device_array_in_op_code_is_a_guard(device):
    assert_prod_guard_falls_back_once(device)  # on a device the guard reads a device array


class StandInGraph:
    """What a CUDA graph does, for the stand-in: a launch runs the captured calls again on the
    same memory (the static inputs) and leaves the results in the captured outputs.
    """

    def __init__(self, fail=False):
        self.fail = fail
        self.captures = self.launches = 0

    def capture(self, run):
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.captures += 1
        self.run = run
        run()  # the warm-up run
        self.outs = run()
        return self.outs

    def launch(self, before, after):
        before()
        for captured, fresh in zip(self.outs, self.run()):
            captured[...] = fresh
        self.launches += 1
        return after()


def dense_forward(device="strict"):
    rng = np.random.default_rng(0)
    w = sadl.Parameter(rng.standard_normal((4, 3)).astype(np.float32), device=device)
    b = sadl.Parameter(rng.standard_normal(3).astype(np.float32), device=device)

    def forward(x):
        with sadl.no_grad():
            h = (x @ w + b).relu()
            return h, h.sum(axis=0)

    return forward, w


def test_cuda_graph_is_used_for_cupy_arrays_only(device):
    # On a GPU (the "cuda" row of the device matrix) this is the check of the CUDA graph path.
    forward, _ = dense_forward(device)
    compiled = sadl.compile(forward, cuda_graph=True)
    rng = np.random.default_rng(2)
    for _ in range(4):
        x = sadl.tensor(rng.standard_normal((5, 4)).astype(np.float32), device=device)
        for got, expected in zip(compiled(x), forward(x)):
            assert got.device == expected.device
            assert np.array_equal(got.numpy(), expected.numpy())
    graph = str(compiled.graph)
    if device == "cuda" and sadl.backends.array_module(x).__name__ == "cupy":
        assert "cuda_graph: replays launch one CUDA graph" in graph
        assert "capture failed" not in graph
    elif device == "cpu":
        assert "cuda_graph: not used: arg0 lives on the host" in graph
    else:
        assert "cuda_graph: not used: the arrays are not CuPy arrays" in graph
        assert "_launch" not in compiled.source


def test_a_cuda_graph_replay_copies_arguments_in_and_results_out(monkeypatch):
    from sadl_compile import cudagraph  # the graph API is CuPy's; here a stand-in's

    graphs = []
    monkeypatch.setattr(
        cudagraph, "graph_for", lambda module: graphs.append(StandInGraph()) or graphs[-1]
    )
    forward, w = dense_forward()
    compiled = sadl.compile(forward, cuda_graph=True)
    rng = np.random.default_rng(1)
    results = []
    for _ in range(4):
        x = sadl.tensor(rng.standard_normal((5, 4)).astype(np.float32), device="strict")
        got, expected = compiled(x), forward(x)
        for g, e in zip(got, expected):
            assert g.device == e.device and np.array_equal(g.numpy(), e.numpy())
        results.append(got)
    assert not np.array_equal(results[1][0].numpy(), results[2][0].numpy())  # fresh arrays
    graph = graphs[-1]
    assert graph.captures == 1 and graph.launches == 3
    assert "cuda_graph: replays launch one CUDA graph" in str(compiled.graph)
    assert "_launch(A, T)" in compiled.source
    w.data = w.data * 2  # a replaced parameter: the checks still run, so it retraces
    x = sadl.tensor(np.ones((5, 4), np.float32), device="strict")
    assert np.array_equal(compiled(x)[0].numpy(), forward(x)[0].numpy())
    assert compiled.stats.traces == 2


def test_a_failed_cuda_graph_capture_warns_and_replays_the_calls(monkeypatch):
    from sadl_compile import cudagraph

    monkeypatch.setattr(cudagraph, "graph_for", lambda module: StandInGraph(fail=True))
    forward, _ = dense_forward()
    compiled = sadl.compile(forward, cuda_graph=True)
    x = sadl.tensor(np.ones((5, 4), np.float32), device="strict")
    compiled(x)
    with pytest.warns(sadl.CompileWarning, match="capturing a CUDA graph .* failed"):
        got = compiled(x)
    assert np.array_equal(got[1].numpy(), forward(x)[1].numpy())
    assert np.array_equal(compiled(x)[0].numpy(), forward(x)[0].numpy())
    assert "capture failed" in str(compiled.graph)


def test_what_a_cuda_graph_cannot_replay_is_named(monkeypatch):
    from sadl_compile import cudagraph

    monkeypatch.setattr(cudagraph, "graph_for", lambda module: StandInGraph())
    w = sadl.Parameter(np.ones((4, 3), np.float32), device="strict")
    opt = sadl.SGD([w], lr=0.1)

    def step(x):
        loss = (x @ w).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    x = sadl.ones((2, 4), device="strict")
    for fn, reason in [
        (step, "a set_grad node (runs Python on every replay)"),
        (lambda t: (t * sadl.rand(*t.shape, device=t.device)).detach(), "a draw node"),
        (lambda t: (t.to("cpu") * 2).detach(), "a value lives on the host"),
        (lambda t: t[t > 0].detach(), "__getitem__ cannot be captured"),  # a data-dependent shape
    ]:
        compiled = sadl.compile(fn, cuda_graph=True)
        compiled(x)
        assert f"cuda_graph: not used: {reason}" in str(compiled.graph)
