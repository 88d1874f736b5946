"""sadl.compile: replays match eager bit for bit, and the semantics the issue lists hold.

Retracing on a new signature or a changed flag, fresh random numbers from sadl's generator on
every call (the eager stream), value reads refused with the line that made them, eval mode and
no_grad, parameter / .grad / optimizer-state updates visible as in eager.
"""

import warnings

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
from sadl import CompileError, CompileWarning
from sadl.plugins import version_counter


def make_step(optimizer_cls, compiled, **compile_options):
    model = MLP()
    opt = optimizer_cls(model.parameters(), lr=0.05)

    def step(x, y):
        loss = cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    fn = sadl.compile(step, **compile_options) if compiled else step
    return fn, model, opt


@pytest.mark.parametrize("optimizer_cls", [sadl.SGD, sadl.Adam])
@pytest.mark.parametrize("fusion", [False, True])
def test_training_steps_replay_identically_to_eager(optimizer_cls, fusion):
    eager, model_e, opt_e = make_step(optimizer_cls, compiled=False)
    compiled, model_c, opt_c = make_step(optimizer_cls, compiled=True, fusion=fusion)
    for x, y in batches(6):
        assert eager(x, y).item() == compiled(x, y).item()
    for (name, p), q in zip(model_e.named_parameters(), model_c.parameters()):
        assert np.array_equal(p.data, q.data), name
        assert np.array_equal(p.grad, q.grad), name
        assert version_counter(p)[0] == version_counter(q)[0], name
    state_e, state_c = opt_e.state_dict(), opt_c.state_dict()
    assert state_e["param_groups"] == state_c["param_groups"]
    for key, values in state_e["state"].items():
        for k, v in values.items():
            assert np.array_equal(v, state_c["state"][key][k]), (key, k)
    assert compiled.stats.traces == 1 and compiled.stats.replays == 5


def test_w1_chain_and_its_gradient_match_eager():
    def chain(x):
        y = x
        for _ in range(50):
            y = y * 1.0001 + 0.0001
        loss = y.sum()
        loss.backward()
        return loss

    compiled = sadl.compile(chain)
    for value in (0.5, 0.25, -1.0):
        xe = sadl.Tensor(np.full((8, 8), value, np.float32), requires_grad=True)
        xc = sadl.Tensor(np.full((8, 8), value, np.float32), requires_grad=True)
        assert chain(xe).item() == compiled(xc).item()
        assert np.array_equal(xe.grad, xc.grad)
    assert compiled.stats.traces == 1


def test_a_new_signature_traces_again_and_the_cache_is_bounded():
    compiled = sadl.compile(lambda x: (x * 2).sum(), cache_size=2)
    for n in (3, 4, 3, 5, 4):
        assert compiled(sadl.ones(n)).item() == 2 * n
    # 3, 4 traced; 3 replayed; 5 traced (evicts 4, the least recently used); 4 traced again
    assert compiled.stats.traces == 4 and compiled.stats.replays == 1
    assert compiled.stats.reasons[0] == "first call"
    compiled(sadl.ones(3, dtype=np.float64))
    assert compiled.stats.traces == 5


def test_a_function_that_keeps_retracing_gets_a_warning():
    compiled = sadl.compile(lambda x: x + 1, warn_after=3)
    with pytest.warns(CompileWarning, match="traced 4 times"):
        for n in range(1, 6):
            compiled(sadl.ones(n))


def test_replacing_a_parameter_array_retraces():
    model = MLP()
    compiled = sadl.compile(lambda x: model(x))
    x = np.ones((2, 12), np.float32)
    with sadl.no_grad():
        first = compiled(x).numpy()
        model.w2.data = model.w2.data * 2
        second = compiled(x).numpy()
        assert np.array_equal(second, model(x).numpy())
    assert not np.array_equal(first, second)
    assert compiled.stats.traces == 2
    assert "replaced" in compiled.stats.reasons[1]


def test_outputs_are_fresh_arrays_on_every_call():
    compiled = sadl.compile(lambda x: x * 3)
    x = sadl.ones(4)
    first = compiled(x)
    second = compiled(x)
    third = compiled(x)
    second.data[:] = 0
    assert first.data is not third.data
    assert np.array_equal(third.numpy(), np.full(4, 3.0, np.float32))


def test_random_draws_are_fresh_and_follow_the_eager_stream():
    def noisy(x):
        keep = sadl.rand(*x.shape) >= 0.5  # sadl's default generator, as Dropout draws
        return x * keep.astype(np.float32) * 2.0

    assert_draws_replay_as_in_eager(noisy, sadl.ones(64))


def test_a_private_generator_is_drawn_from_on_every_replay():
    gen = sadl.random.resolve_generator(3)
    twin = np.random.default_rng(3)
    compiled = sadl.compile(lambda x: x + gen.standard_normal(x.shape).astype(np.float32))
    x = sadl.zeros(5)
    for _ in range(3):
        expected = twin.standard_normal(5).astype(np.float32)
        assert np.array_equal(compiled(x).numpy(), expected)


def test_reading_a_value_into_python_is_refused_with_the_line():
    def step(x):
        loss = (x * x).sum()
        if loss.item() > 1:  # the line the message names
            loss = loss * 2
        return loss

    with pytest.raises(CompileError, match=r"\.item\(\).*test_compile\.py:\d+.*loss\.item\(\) > 1"):
        sadl.compile(step)(sadl.ones(3))


@pytest.mark.parametrize(
    "body",
    [
        lambda x: x * 2 if x.sum() > 0 else x,  # bool(tensor)
        lambda x: x * float(x.sum()),
        lambda x: x[int(x.argmax())],
        lambda x: sadl.tensor(x.tolist()),
    ],
)
def test_every_kind_of_value_read_is_refused(body):
    with pytest.raises(CompileError, match="reads a tensor's value into Python"):
        sadl.compile(body)(sadl.arange(4.0))


def test_tensor_state_is_restored_after_a_refused_trace():
    model = MLP()
    compiled = sadl.compile(lambda x: model(x).sum().item())
    with pytest.raises(CompileError):
        compiled(np.ones((1, 12), np.float32))
    assert type(model.w1.data) is np.ndarray
    assert np.isfinite(model(np.ones((1, 12), np.float32)).numpy()).all()


def test_a_branch_on_an_array_in_op_code_is_a_guard_with_an_eager_fallback():
    compiled = assert_prod_guard_falls_back_once()
    assert "guard" in str(compiled.graph)


class Scaled(sadl.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = sadl.Parameter(np.arange(3.0, dtype=np.float32))

    def forward(self, x):
        return x * self.w * (2.0 if self.training else 1.0)


def test_eval_mode_and_no_grad_get_their_own_traces():
    model = Scaled()
    compiled = sadl.compile(lambda x: model(x).sum().detach())
    x = sadl.ones(3)
    assert compiled(x).item() == 6.0
    model.eval()
    assert compiled(x).item() == 3.0
    with sadl.no_grad():
        out = compiled(x)
    assert out.item() == 3.0 and not out.requires_grad
    model.train()
    assert compiled(x).item() == 6.0
    assert compiled.stats.traces == 3  # train, eval, eval under no_grad; train is replayed
    assert any("training changed" in r for r in compiled.stats.reasons)


def test_a_learning_rate_schedule_between_calls_is_honoured():
    eager, model_e, opt_e = make_step(sadl.Adam, compiled=False)
    compiled, model_c, opt_c = make_step(sadl.Adam, compiled=True)
    for i, (x, y) in enumerate(batches(5)):
        for opt in (opt_e, opt_c):
            opt.param_groups[0]["lr"] = 0.05 / (i + 1)
        assert eager(x, y).item() == compiled(x, y).item()
    for p, q in zip(model_e.parameters(), model_c.parameters()):
        assert np.array_equal(p.data, q.data)


def test_state_dicts_are_unchanged_and_loading_one_retraces():
    eager, model_e, opt_e = make_step(sadl.Adam, compiled=False)
    compiled, model_c, opt_c = make_step(sadl.Adam, compiled=True)
    data = batches(6)
    for x, y in data[:3]:
        eager(x, y)
        compiled(x, y)
    saved_model, saved_opt = model_c.state_dict(), opt_c.state_dict()
    assert list(saved_model) == list(model_e.state_dict())
    for k, v in model_e.state_dict().items():
        assert np.array_equal(v.numpy(), saved_model[k].numpy()) and v.shape == saved_model[k].shape
    opt_c.load_state_dict(saved_opt)
    model_c.load_state_dict({k: v.numpy().copy() for k, v in saved_model.items()})
    for x, y in data[3:]:
        assert eager(x, y).item() == compiled(x, y).item()
    assert compiled.stats.traces == 2


def test_a_tensor_output_that_still_needs_its_graph_is_refused():
    model = MLP()
    with pytest.raises(CompileError, match="requires grad"):
        sadl.compile(lambda x: model(x))(np.ones((1, 12), np.float32))


def test_a_compiled_function_called_while_tracing_is_part_of_the_trace():
    inner = sadl.compile(lambda x: x * 2)
    outer = sadl.compile(lambda x: inner(x) + 1)
    assert outer(sadl.ones(2)).tolist() == [3.0, 3.0]
    assert outer(sadl.ones(2)).tolist() == [3.0, 3.0]
    assert inner.stats.traces == 0 and outer.stats.replays == 1


def test_python_side_effects_run_only_while_tracing():
    calls = []

    def fn(x):
        calls.append(1)
        return x + 1

    compiled = sadl.compile(fn)
    for _ in range(3):
        compiled(sadl.ones(2))
    assert len(calls) == 1


def test_keyword_arguments_and_nested_structures():
    compiled = sadl.compile(lambda pair, scale=1.0: {"sum": (pair[0] + pair[1]) * scale})
    out = compiled((sadl.ones(2), np.ones(2, np.float32)), scale=3.0)
    again = compiled((sadl.ones(2), np.ones(2, np.float32)), scale=3.0)
    assert out["sum"].tolist() == again["sum"].tolist() == [6.0, 6.0]
    compiled((sadl.ones(2), np.ones(2, np.float32)), scale=4.0)
    assert compiled.stats.traces == 2  # a Python number is part of the signature


def test_gradients_accumulate_into_an_existing_grad_as_in_eager():
    w = sadl.Parameter(np.ones(3, np.float32))
    compiled = sadl.compile(lambda x: (w * x).sum().backward())
    x = sadl.arange(3.0)
    compiled(x)  # traced with w.grad None: assigns
    compiled(x)  # w.grad is set now: a new trace accumulates
    compiled(x)
    assert w.grad.tolist() == [0.0, 3.0, 6.0]
    assert compiled.stats.traces == 2


def test_print_graph_shows_the_ir():
    compiled, _, _ = make_step(sadl.SGD, compiled=True)
    x, y = batches(1)[0]
    compiled(x, y)
    text = str(compiled.graph)
    assert text.startswith("graph step: 2 inputs")
    for expected in ("matmul(", "set_grad", "SGD.step", "memory_plan:", "return tensor(%"):
        assert expected in text, expected
    assert "def replay(A, T):" in compiled.source


def test_compile_rejects_bad_arguments():
    with pytest.raises(TypeError, match="expected a function"):
        sadl.compile(3)
    with pytest.raises(ValueError, match="cache_size"):
        sadl.compile(lambda x: x, cache_size=0)
    with pytest.raises(ValueError, match="unknown passes"), warnings.catch_warnings():
        sadl.compile(lambda x: x + 1, passes=["no_such_pass"])(sadl.ones(1))
