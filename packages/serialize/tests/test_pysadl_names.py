"""py-sadl 2.0's names on sadl's classes: thin aliases, freezing, optimizer keywords."""

import numpy as np
import pytest
import sadl


class Affine(sadl.nn.Module):  # a py-sadl style Function: forward as __call__, list of params
    def __init__(self):
        self.W = sadl.Parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
        self.extra = [sadl.Parameter(np.ones(3, np.float32))]

    def __call__(self, x):
        return x @ self.W + self.extra[0]


def test_parameters_is_callable_and_iterable_and_get_parameters_is_by_name():
    model = Affine()
    assert list(model.parameters) == list(model.parameters()) and len(model.parameters) == 2
    named = model.get_parameters()
    assert list(named) == ["W", "extra.0"] and named["W"] is model.W
    optimizer = sadl.SGD(named, lr=0.1)  # a mapping of names to parameters, as py-sadl passes
    assert optimizer.param_groups[0]["params"] == [model.W, model.extra[0]]


def test_modes_devices_and_traversal():
    model = Affine()
    assert model.is_training and model.inference() is model and not model.is_training
    assert model.train().is_training
    assert model.devices == ("cpu",) and model.copy_to_device("cpu") is model
    assert model.device == "cpu"  # torch's ecosystem: the one device
    seen = []
    model.traverse_parameters(lambda name, p: seen.append(name))
    assert seen == ["W", "extra.0"]
    model.traverse_parameters(
        lambda name, p: sadl.Parameter(p.numpy() * 0) if name == "extra.0" else None
    )
    assert float(model.extra[0].sum()) == 0.0
    copy = model.W.copy_to_device("cpu")
    assert isinstance(copy, sadl.Parameter) and copy is not model.W
    assert sadl.device(0) == "cuda:0" and sadl.device(0) == 0  # py-sadl's GPU ids


def test_load_parameters_checks_names_and_devices():
    model, other = Affine(), Affine()
    other.W.data[...] = 7
    model.load_parameters(other.get_parameters())
    assert (model.W.numpy() == 7).all()
    model.load_parameters({"W": np.zeros((2, 3))}, partial=True)
    assert (model.W.numpy() == 0).all()
    with pytest.raises(KeyError, match="partial=True"):
        model.load_parameters({"W": np.zeros((2, 3))})
    with pytest.raises(KeyError, match="py-sadl names: load the file with sadl.io.load_pysadl"):
        model.load_parameters({"layers[0].W": np.zeros((2, 3))})


def test_freezing_a_model_the_py_sadl_way():
    model = Affine()
    assert model.requires_grad
    model.requires_grad = False
    assert not model.requires_grad and not any(p.requires_grad for p in model.parameters)
    optimizer = sadl.SGD(model.parameters(), lr=0.1)  # frozen parameters are accepted...
    x = sadl.tensor(np.ones((1, 2), np.float32), requires_grad=True)
    model(x).sum().backward()
    before = model.W.numpy().copy()
    optimizer.step()  # ...and left alone: they got no gradient
    assert model.W.grad is None and np.array_equal(model.W.numpy(), before)
    assert x.grad is not None
    model.requires_grad = True
    model(x).sum().backward()
    assert model.W.grad is not None
    with pytest.raises(ValueError, match="not a leaf"):
        sadl.SGD([sadl.tensor(np.ones(2))], lr=0.1)  # a plain constant is still a mistake


def test_py_sadl_optimizer_keywords_mean_what_they_meant():
    def run(make):
        p = sadl.Parameter(np.array([1.0, -2.0, 3.0]))
        opt = make([p])
        for step in range(3):
            p.grad = np.array([0.5, -1.0, 2.0]) * (step + 1)
            opt.step()
        return p.numpy()

    # py-sadl: m = (1 - friction) m + g; p -= lr m  ==  torch's momentum = 1 - friction
    np.testing.assert_allclose(
        run(lambda ps: sadl.SGD(ps, lr=0.1, friction=0.1)),
        run(lambda ps: sadl.SGD(ps, lr=0.1, momentum=0.9)),
    )
    np.testing.assert_allclose(
        run(lambda ps: sadl.Adam(ps, lr=0.1, beta_1=0.8, beta_2=0.99, epsilon=1e-6)),
        run(lambda ps: sadl.Adam(ps, lr=0.1, betas=(0.8, 0.99), eps=1e-6)),
    )
    with pytest.raises(TypeError, match="not both"):
        sadl.SGD([sadl.Parameter(np.ones(1))], lr=0.1, momentum=0.5, friction=0.5)


def test_grad_mode_names():
    @sadl.no_grad_fn
    def double(t):
        return t * 2

    x = sadl.tensor([1.0], requires_grad=True)
    assert not double(x).requires_grad
    assert sadl.is_global_grad_mode_enabled()
    sadl.set_global_grad_mode(False)
    try:
        assert not (x * 2).requires_grad and not sadl.is_grad_enabled()
    finally:
        sadl.set_global_grad_mode(True)
