"""sadl.compile never replays a stale value: memory a view shares, captured generators and
arrays changed between calls, and what tensors hold after a call.

Each test runs a program eagerly and compiled (``fusion=False``: bit for bit) on identical
state, changing that state the same way between calls, and compares what a user can see.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sadl
from sadl.random import resolve_generator

pytest.importorskip("sadl_layers")
nn = sadl.nn


def _conv_stack(dims, between):
    conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
    layers = [conv(4, 8, 3)]
    if between == "silu":
        layers.append(nn.SiLU())
    elif between == "groupnorm":
        layers.append(nn.GroupNorm(2, 8))
    layers.append(conv(8, 4, 1))
    return nn.Sequential(*layers)


def _weight_grads(model, x):
    model.zero_grad()
    (model(x) ** 2).mean().backward()
    return [p.grad.copy() for p in model.parameters()]


@pytest.mark.parametrize(
    ("dims", "between"), [(2, None), (1, None), (3, None), (2, "silu"), (2, "groupnorm")]
)
def test_one_by_one_conv_fed_by_a_layer_gets_eager_gradients_on_every_replay(dims, between):
    sadl.manual_seed(0)
    eager = _conv_stack(dims, between)
    sadl.manual_seed(0)
    twin = _conv_stack(dims, between)
    size = (2, 4) + (6,) * dims
    x = sadl.tensor(np.random.default_rng(0).standard_normal(size).astype(np.float32))
    step = sadl.compile(lambda x: _weight_grads(twin, x), fusion=False)
    for _ in range(3):
        want, got = _weight_grads(eager, x), step(x)
        for a, b in zip(want, got, strict=True):
            assert a.tobytes() == np.asarray(b).tobytes()
    assert step.stats.replays == 2


def test_a_view_made_through_the_array_interface_keeps_its_base_buffer_alive():
    # sliding_window_view's result has a non-array base (as_strided's): the memory plan must
    # still see it is a view of h, or it hands h's buffer to exp(x) while the view is read
    def f(x):
        h = x * 2.0
        v = np.lib.stride_tricks.sliding_window_view(h, 1, axis=-1)
        g = np.exp(x)
        return np.sum(v[..., 0] + g)

    compiled = sadl.compile(f, fusion=False)
    x = np.arange(6.0).reshape(2, 3)
    for _ in range(3):
        assert compiled(x).tobytes() == f(x).tobytes()


def _draws(g):
    def f(x):
        a = sadl.rand(3, rng=g, dtype=np.float64)
        b = sadl.tensor(resolve_generator(g).standard_normal(3))
        drop = nn.Dropout(0.5, rng=g)  # built inside the call, on the captured generator
        return (a * x + b + drop(x)).detach()

    return f


@pytest.mark.parametrize("fusion", [False, True])
def test_a_captured_numpy_generator_draws_on_at_every_replay(fusion):
    g_eager, g_compiled = np.random.default_rng(0), np.random.default_rng(0)
    eager, compiled = _draws(g_eager), sadl.compile(_draws(g_compiled), fusion=fusion)
    x = sadl.ones(3, dtype=np.float64)
    outs = []
    for _ in range(3):
        want, got = eager(x).numpy(), compiled(x).numpy()
        assert want.tobytes() == got.tobytes()
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1])  # the stream moved on
    assert g_eager.bit_generator.state == g_compiled.bit_generator.state
    assert compiled.stats.replays == 2


def test_a_numpy_generator_made_inside_the_call_starts_anew_on_every_replay():
    def f():
        return sadl.rand(2, rng=np.random.default_rng(5), dtype=np.float64)

    compiled = sadl.compile(f)
    for _ in range(3):
        assert compiled().numpy().tobytes() == f().numpy().tobytes()


def test_numpy_work_on_a_captured_array_alone_is_redone_when_it_changes():
    c = np.array([0.5, 1.0, 2.0])
    compiled = sadl.compile(lambda x: x * np.exp(c), fusion=False)
    x = sadl.ones(3, dtype=np.float64)
    for _ in range(3):
        c += 1.0
        assert compiled(x).numpy().tobytes() == (x * np.exp(c)).numpy().tobytes()


def test_a_backward_rule_reading_a_changed_captured_array_gets_its_new_values():
    c = np.array([0.5, 1.0, 2.0])
    p = sadl.Parameter(np.array([1.0, 2.0, 3.0]))

    def grad_of_arctan2():
        p.grad = None
        np.arctan2(c, p).sum().backward()  # the gradient reads c*c + p*p
        return p.grad.copy()

    compiled = sadl.compile(grad_of_arctan2, fusion=False)
    for _ in range(3):
        c *= 1.5
        assert compiled().tobytes() == grad_of_arctan2().tobytes()


def test_a_captured_gradient_seed_changed_in_place_reaches_the_scatter():
    w = np.arange(9.0).reshape(3, 3)
    a = sadl.Parameter(np.arange(12.0).reshape(4, 3))

    def scatter():
        a.grad = None
        a[a.argmax(0)].backward(w)
        return a.grad.copy()

    compiled = sadl.compile(scatter, fusion=False)
    for _ in range(3):
        w += 1.0
        assert compiled().tobytes() == scatter().tobytes()


def test_the_numpy_scalar_data_of_a_0d_parameter_stays_a_scalar():
    p = sadl.Parameter(np.ones(()))
    p.data = p.data * 1.25  # eager leaves a NumPy scalar here
    assert isinstance(p.data, np.generic)
    compiled = sadl.compile(lambda x: (p * x).detach())
    for _ in range(3):
        compiled(sadl.ones(2, dtype=np.float64))
        assert isinstance(p.data, np.float64) and p.data == 1.25
    assert compiled.stats.traces == 1


def test_a_0d_parameter_scaled_inside_the_call_holds_a_scalar_as_in_eager():
    p, q = sadl.Parameter(np.ones(())), sadl.Parameter(np.ones(()))

    def scale(t):
        t.data = t.data * 1.25

    compiled = sadl.compile(lambda: scale(q))
    for _ in range(3):
        scale(p)
        compiled()
        assert type(q.data) is type(p.data) and q.data == p.data


def test_the_first_compiled_function_of_a_process_clipping_gradients_traces_once():
    pytest.importorskip("sadl_optim")
    script = textwrap.dedent(
        """
        import sadl
        from sadl_optim.clip import clip_grad_norm
        lin = sadl.nn.Linear(3, 2)
        opt = sadl.SGD(lin.parameters(), lr=0.1)

        @sadl.compile
        def step(x):
            opt.zero_grad()
            (lin(x) ** 2).sum().backward()
            clip_grad_norm(lin.parameters(), 1.0)
            opt.step()

        for _ in range(3):
            step(sadl.ones((4, 3)))
        print(step.stats.traces, step.stats.reasons)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert run.stdout.split()[0] == "1", run.stdout


def test_a_global_array_also_passed_as_the_argument_is_read_per_call():
    first, second = np.arange(3.0), np.arange(3.0) + 10.0
    holder = {"a": first}

    def f(x):
        return x * 2.0 + holder["a"].sum()  # holder["a"] is the argument on the first call

    compiled = sadl.compile(f, fusion=False)
    assert compiled(first).tobytes() == f(first).tobytes()
    holder["a"] = first
    assert compiled(second).tobytes() == f(second).tobytes()


def test_a_0d_parameter_trained_in_the_call_keeps_array_gradients_as_in_eager():
    def make():
        p = sadl.Parameter(np.ones(()))
        opt = sadl.SGD([p], lr=0.1, momentum=0.9)

        def step():
            (p * 3.0 + p * p).backward()  # .grad accumulates across calls
            opt.step()

        return p, step

    p_eager, eager = make()
    p_compiled, step = make()
    compiled = sadl.compile(step, fusion=False)
    for _ in range(4):
        eager(), compiled()
        for a, b in ((p_eager.data, p_compiled.data), (p_eager.grad, p_compiled.grad)):
            assert type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_a_numpy_generator_made_inside_and_passed_with_star_arguments_starts_anew():
    def f(x):
        made = np.random.default_rng(5)
        return (x + sadl.rand(*x.shape, rng=made, dtype=np.float64)).detach()

    compiled = sadl.compile(f)
    x = sadl.ones(2, 3, dtype=np.float64)
    for _ in range(3):
        assert compiled(x).numpy().tobytes() == f(x).numpy().tobytes()


def test_a_numpy_generator_passed_as_an_argument_draws_on():
    def f(x, gen):
        return (x + sadl.rand(*x.shape, rng=gen, dtype=np.float64)).detach()

    g_eager, g_compiled = np.random.default_rng(1), np.random.default_rng(1)
    compiled = sadl.compile(f)
    x = sadl.ones(3, dtype=np.float64)
    for _ in range(3):
        assert compiled(x, g_compiled).numpy().tobytes() == f(x, g_eager).numpy().tobytes()
    assert g_eager.bit_generator.state == g_compiled.bit_generator.state
