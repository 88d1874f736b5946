"""``inplace=True`` as torch has it: ``F.relu(x, inplace=True)`` and ``nn.ReLU(inplace=True)``
overwrite ``x`` and return it, recorded on the graph (``Tensor.inplace``), so the gradient
through the overwritten tensor is torch's; a leaf that requires grad is refused, as in torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sadl
from sadl.nn import functional

torch = pytest.importorskip("torch", reason="the reference is PyTorch (the local CPU wheel)")

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("relu", "ReLU", {}),
    ("relu6", "ReLU6", {}),
    ("elu", "ELU", {"alpha": 0.7}),
    ("celu", "CELU", {"alpha": 1.0}),
    ("selu", "SELU", {}),
    ("leaky_relu", "LeakyReLU", {"negative_slope": 0.2}),
    ("hardtanh", "Hardtanh", {"min_val": -0.5, "max_val": 0.7}),
    ("silu", "SiLU", {}),
    ("mish", "Mish", {}),
    ("hardswish", "Hardswish", {}),
]
A = np.random.default_rng(0).standard_normal((3, 5)) * 3


@pytest.mark.parametrize("fn, layer, kwargs", CASES)
@pytest.mark.parametrize("as_layer", [False, True])
def test_inplace_overwrites_the_input_and_keeps_torchs_gradient(fn, layer, kwargs, as_layer):
    leaf, tleaf = sadl.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    x, t = leaf * 1.5, tleaf * 1.5  # (a non-leaf: torch overwrites those)
    if as_layer:
        y = getattr(sadl.nn, layer)(**kwargs, inplace=True)(x)
        ty = getattr(torch.nn, layer)(**kwargs, inplace=True)(t)
    else:
        y = getattr(functional, fn)(x, **kwargs, inplace=True)
        ty = getattr(torch.nn.functional, fn)(t, **kwargs, inplace=True)
    assert y is x
    np.testing.assert_allclose(x.data, t.detach().numpy(), rtol=1e-12, atol=1e-15)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(leaf.grad, tleaf.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_inplace_on_a_leaf_that_requires_grad_is_refused_and_works_without_grad():
    leaf = sadl.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        functional.relu(leaf, inplace=True)
    plain = sadl.tensor(A.copy())
    assert sadl.nn.ReLU(inplace=True)(plain) is plain and (plain.data >= 0).all()
    with pytest.raises(TypeError, match="overwrites a Tensor"):
        functional.relu(A.copy(), inplace=True)
    assert repr(sadl.nn.ReLU(inplace=True)) == "ReLU(inplace=True)"


def test_a_value_saved_before_the_overwrite_still_differentiates():
    # exp's backward reads its output, which the in-place activation then overwrites: torch
    # refuses the backward; sadl kept the old value for it, so it gives the out-of-place result
    leaf, twin = sadl.tensor(A, requires_grad=True), sadl.tensor(A, requires_grad=True)
    x = leaf.exp()
    functional.leaky_relu(x, 0.1, inplace=True)
    x.sum().backward()
    functional.leaky_relu(twin.exp(), 0.1).sum().backward()
    np.testing.assert_array_equal(leaf.grad, twin.grad)
    tleaf = torch.tensor(A, requires_grad=True)
    t = tleaf.exp()
    torch.nn.functional.leaky_relu(t, 0.1, inplace=True)
    with pytest.raises(RuntimeError, match="inplace"):
        t.sum().backward()


@pytest.mark.parametrize("name", ["relu_", "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_"])
def test_the_underscore_spellings_are_the_inplace_ones(name):
    x, t = sadl.tensor(A.copy()), torch.tensor(A.copy())
    assert getattr(functional, name)(x) is x
    getattr(torch.nn.functional, name)(t)
    np.testing.assert_allclose(x.data, t.numpy(), rtol=1e-12, atol=1e-15)
