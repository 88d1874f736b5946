"""One install point for a tracer: ``sadl.backends.install_tracer`` takes a
``sadl.backends.Tracer`` that sees device-array stand-ins, host/device copies, value-dependent
calls, draws, tensors' data and grad, modules' training flags, optimizer steps, generators made
and rng states, in the thread that installed it only; None removes it, and then nothing is
routed anywhere."""

import threading

import numpy as np
import pytest
import sadl
from sadl import backends
from sadl import random as sadl_random


class NoStandIns:
    """No object is of this type: a tracer with no stand-ins for device arrays."""


class Recorder:
    """A tracer that passes every call through and remembers what it saw."""

    def __init__(self, kind=NoStandIns):
        self.array_kind = kind
        self.seen = []

    def array_of(self, x):
        return x.array

    def module_of(self, x):
        if not isinstance(x, self.array_kind):  # host data (or None) in the tracing thread
            self.seen.append(("module", type(x).__name__))
            return np
        return backends.array_module(x.array)

    def on_transfer(self, copy, data, args):
        self.seen.append(("transfer", getattr(copy, "__name__", "copy")))
        return copy(data, *args)

    def on_value_dependent(self, fn, args, kwargs):
        self.seen.append(("value_dependent", fn.__name__))
        return fn(*args, **kwargs)

    def on_read(self, obj, name, value):
        self.seen.append(("read", name))
        return value

    def on_write(self, obj, name, value):
        self.seen.append(("write", name))

    def on_step(self, optimizer, closure, step):
        self.seen.append(("step", type(optimizer).__name__))
        return step(optimizer, closure)

    def on_generator(self, generator, seeded):
        self.seen.append(("generator", seeded))

    def on_rng_state(self, state, setting):
        self.seen.append(("set_rng_state" if setting else "get_rng_state", "cpu"))

    def on_draw(self, generator, method, args, kwargs):
        self.seen.append(("draw", method))
        found = sadl_random.observed_device_generator(generator)
        if found is not None:
            return getattr(found[0], method)(*args, **kwargs)
        return getattr(np.random.Generator, method)(generator, *args, **kwargs)


@pytest.fixture
def tracer():
    recorder = Recorder()
    backends.install_tracer(recorder)
    try:
        yield recorder
    finally:
        backends.install_tracer(None)


def test_an_installed_tracer_sees_draws_and_value_dependent_calls(tracer):
    @backends.value_dependent
    def halve(x):
        return x / 2

    gen = sadl_random.Generator(np.random.PCG64(0))
    drawn = gen.standard_normal(3)
    assert halve(4.0) == 2.0
    np.testing.assert_array_equal(drawn, np.random.default_rng(0).standard_normal(3))
    assert tracer.seen == [
        ("generator", False),
        ("draw", "standard_normal"),
        ("value_dependent", "halve"),
    ]


def test_the_tracer_sees_tensors_modules_steps_and_rng_states(tracer):
    w = sadl.Parameter(np.ones(2))
    tracer.seen.clear()
    opt = sadl.SGD([w], lr=0.5)
    w.grad = np.ones(2)
    assert tracer.seen == [("write", "grad")]
    opt.step()  # seen as one step: the step itself works on the slots
    assert tracer.seen == [("write", "grad"), ("step", "SGD")]
    np.testing.assert_array_equal(w.data, [0.5, 0.5])
    module = sadl.nn.Module()
    tracer.seen.clear()
    module.eval()
    assert not module.training
    sadl.random.set_rng_state(sadl.random.get_rng_state())
    sadl.manual_seed(3)
    assert tracer.seen == [
        ("write", "training"),
        ("read", "training"),
        ("get_rng_state", "cpu"),
        ("set_rng_state", "cpu"),
        ("generator", True),
    ]


def test_another_thread_is_not_seen_by_this_thread_s_tracer(tracer):
    def eager():
        w = sadl.Parameter(np.ones(2))
        w.grad = np.ones(2)
        sadl.SGD([w], lr=0.5).step()
        sadl.nn.Module().eval()
        sadl_random.Generator(np.random.PCG64(0)).random(2)

    thread = threading.Thread(target=eager)
    thread.start()
    thread.join()
    assert tracer.seen == []


def test_removing_the_tracer_routes_nothing():
    recorder = Recorder()
    backends.install_tracer(recorder)
    backends.install_tracer(None)

    @backends.value_dependent
    def halve(x):
        return x / 2

    sadl_random.Generator(np.random.PCG64(0)).random(2)
    assert halve(2.0) == 1.0
    assert recorder.seen == []


def test_the_tracer_sees_a_copy_to_a_device_and_its_device_generators(tracer, device):
    if device == "cpu":
        sadl.tensor(np.ones(2), device="cpu")
        assert tracer.seen == []  # the CPU never copies
        return
    t = sadl.tensor(np.ones(2), device=device)
    assert ("transfer", "from_host") in [(k, n.lstrip("_")) for k, n in tracer.seen]
    tracer.seen.clear()
    sadl_random.generator(device).random((2,))
    assert tracer.seen == [("draw", "random")]
    assert t.device.type == device


def test_a_stand_in_array_kind_is_an_array_of_its_array_s_module(tracer):
    class StandIn:
        def __init__(self, array):
            self.array = array

    backends.install_tracer(Recorder(StandIn))
    x = StandIn(np.ones(2))
    assert backends.is_array(x)
    assert backends.array_module(x) is np
    assert backends.device_of(x) == "cpu"


def test_the_tracer_hands_out_the_host_module_in_its_thread_only(tracer):
    recorder = Recorder()
    backends.install_tracer(recorder)
    made = sadl.zeros(2)  # sadl's factories make their arrays with array_module(None)
    assert backends.array_module(np.ones(2)) is np  # what the tracer's module_of returned
    elsewhere = []
    other = threading.Thread(target=lambda: elsewhere.append(backends.array_module(np.ones(2))))
    other.start()
    other.join()
    backends.install_tracer(None)
    assert backends.array_module(np.ones(2)) is np
    assert made.shape == (2,) and elsewhere == [np]
    assert recorder.seen == [("module", "NoneType"), ("module", "ndarray")]
