"""Tracing hears the traced function through sadl's tracer protocol: it replaces nothing.

Seen from inside a traced function, every attribute of sadl's modules, of the plugins' modules
and of their classes is the object it was before the trace (the one difference allowed is the
count of tracing threads that ``sadl.backends.install_tracer`` keeps), and NumPy's namespace
differs only in the NumPy functions docs/compile.md lists. Traces run in several
threads at once, and a thread training eagerly meanwhile gets eager's bits.
"""

import sys
import threading
from pathlib import Path

import numpy as np
import sadl
from compile_models import MLP, batches, cross_entropy
from sadl_compile.hooks import CONSTRUCTORS

#: What install_tracer sets while a thread traces: the number of tracing threads.
TRACER_SLOT = {("sadl._tensor_base", "watching")}


def _ours(name):
    return name == "sadl" or name.startswith(("sadl.", "sadl_"))


def _snapshot():
    """(module or class, attribute) -> the object it holds, for sadl, the plugins and NumPy."""
    seen = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (_ours(name) or name == "numpy"):
            continue
        for attr, value in list(vars(module).items()):
            seen[(name, attr)] = value
            if _ours(name) and isinstance(value, type) and value.__module__ == name:
                for key, member in list(vars(value).items()):
                    seen[(f"{name}.{value.__qualname__}", key)] = member
    return seen


def _differences(before, now):
    changed = {k for k in before if k in now and now[k] is not before[k]}
    added = {k for k in now if k not in before and k[0] in {m for m, _ in before}}
    return changed | added


def _training_step(model, opt):
    def step(x, y):
        model.train()
        loss = cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def test_nothing_of_sadl_or_a_plugin_is_replaced_while_tracing():
    model = MLP(dropout=True)
    opt = sadl.Adam(model.parameters(), lr=0.01)
    step = _training_step(model, opt)
    x, y = batches(1)[0]
    sadl.compile(step)(x, y)  # a first trace imports whatever tracing imports lazily
    before = _snapshot()
    found = []

    def watched(x, y):
        loss = step(x, y)
        found.append(_differences(before, _snapshot()))
        return loss

    sadl.compile(watched)(x, y)
    (inside,) = found
    assert {k for k in inside if k[0] != "numpy"} == TRACER_SLOT
    assert {attr for module, attr in inside if module == "numpy"} <= set(CONSTRUCTORS)
    assert not _differences(before, _snapshot()) - TRACER_SLOT  # and all is back afterwards


def test_only_conversions_and_user_buffers_are_wrapped_each_listed_with_why():
    # Two conversions and the four constructors user code fills by assignment; op code
    # allocates through the backend's array module and needs none.
    docs = (Path(__file__).parents[3] / "docs" / "compile.md").read_text()
    table = docs.split("| wrapped | why |")[1].split("\n\n")[0]
    listed = {row.split("`")[1].removeprefix("np.") for row in table.splitlines()[2:]}
    assert set(CONSTRUCTORS) == {"array", "asarray", "zeros", "empty", "ones", "full"}
    assert listed == set(CONSTRUCTORS)


def _run_pair(compiled):
    """Call each compiled step of ``compiled`` three times, each in its own thread."""
    results = [[] for _ in compiled]
    errors = []

    def work(i):
        try:
            for x, y in batches(3, seed=i):
                results[i].append(compiled[i](x, y).item())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(compiled))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


def test_two_threads_trace_at_once_and_match_eager():
    both_tracing = threading.Barrier(2, timeout=30)

    def make(i, compiled):
        model = MLP(seed=i)
        step = _training_step(model, sadl.SGD(model.parameters(), lr=0.05))
        if not compiled:
            return step, model

        def meeting(x, y):  # Python runs only while tracing: both traces are under way here
            both_tracing.wait()
            return step(x, y)

        return sadl.compile(meeting), model

    eager = [make(i, False) for i in range(2)]
    expected = [[eager[i][0](x, y).item() for x, y in batches(3, seed=i)] for i in range(2)]
    pairs = [make(i, True) for i in range(2)]
    got = _run_pair([f for f, _ in pairs])
    assert got == expected
    for (_, m_e), (f, m_c) in zip(eager, pairs):
        assert f.stats.traces == 1 and f.stats.replays == 2
        for p, q in zip(m_e.parameters(), m_c.parameters()):
            assert np.array_equal(p.data, q.data) and np.array_equal(p.grad, q.grad)


def _eager_training(seed):
    """Losses and final weights of four eager steps of a dropout MLP (its own generator)."""
    model = MLP(seed=seed)
    opt = sadl.Adam(model.parameters(), lr=0.01)
    rng = sadl.random.resolve_generator(seed)
    losses = []
    for x, y in batches(4, seed=seed):
        model.train()
        h = (sadl.tensor(x) @ model.w1 + model.b1).relu()
        keep = sadl.tensor(rng.random(h.shape) >= 0.25)
        logits = (h * keep.astype(np.float32) / 0.75) @ model.w2 + model.b2
        loss = cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.data.copy() for p in model.parameters()]


def test_eager_training_in_another_thread_during_a_trace_gets_eager_bits():
    alone_losses, alone_weights = _eager_training(5)
    tracing, eager_done = threading.Event(), threading.Event()
    model = MLP(dropout=True)
    step = _training_step(model, sadl.SGD(model.parameters(), lr=0.05))

    def paused(x, y):  # holds its trace open while the other thread trains
        tracing.set()
        assert eager_done.wait(timeout=60)
        return step(x, y)

    compiled = sadl.compile(paused)
    x, y = batches(1)[0]
    tracer = threading.Thread(target=compiled, args=(x, y))
    tracer.start()
    try:
        assert tracing.wait(timeout=60)
        losses, weights = _eager_training(5)
    finally:
        eager_done.set()
        tracer.join(timeout=120)
    assert compiled.stats.traces == 1
    assert losses == alone_losses
    assert all(np.array_equal(a, b) for a, b in zip(weights, alone_weights, strict=True))
