"""sadl_layers.init, and the same functions as ``sadl.nn.init``, against torch.nn.init: the same
fans, gains, bounds and standard deviations (the random streams differ, so random fills are
compared by their exact bounds and their sample statistics), exact fills for the constant ones,
reproducible draws with a generator."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import sadl
import sadl_layers.init

torch = pytest.importorskip("torch", reason="PyTorch is the reference for these parity tests")
pytestmark = pytest.mark.torch


@pytest.fixture(params=["sadl_layers.init", "sadl.nn.init"])
def init(request):
    """The init module, by its own name and as torch's ``nn.init`` spells it."""
    return importlib.import_module(request.param)


def test_sadl_nn_init_is_torchs_spelling_of_sadl_layers_init():
    import sadl.nn.init as by_import
    from sadl.nn import init as by_from

    assert by_import is by_from is sadl.nn.init
    for name in [*sadl_layers.init.__all__, "fans"]:
        assert getattr(sadl.nn.init, name) is getattr(sadl_layers.init, name)
    w = sadl.nn.init.kaiming_uniform_(sadl.Parameter(np.zeros((8, 5))), a=math.sqrt(5))
    assert 0 < np.abs(w.data).max() <= 1 / math.sqrt(5)  # Linear's default bound 1/sqrt(fan_in)
    with pytest.raises(AttributeError, match="'sadl.nn.init' has no attribute 'xavier'"):
        sadl.nn.init.xavier  # noqa: B018


SHAPES = [(64, 32), (16, 8, 3, 3), (8, 4, 5), (6, 2, 2, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES)
def test_fans_equal_torch(shape, init):
    want = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init.fans(sadl.Parameter(np.zeros(shape))) == want


GAINS = [("linear",), ("conv3d",), ("sigmoid",), ("tanh",), ("relu",), ("leaky_relu",)]


@pytest.mark.parametrize("args", [*GAINS, ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu",)])
def test_gains_equal_torch(args, init):
    assert init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))


def _bound_and_std(init, name, shape, **kwargs):
    """(max |w|, std) of a large torch fill and of sadl's, same arguments."""
    t = torch.empty(shape, dtype=torch.float64)
    getattr(torch.nn.init, name)(t, **kwargs)
    p = sadl.Parameter(np.zeros(shape))
    out = getattr(init, name)(p, **kwargs, generator=0)
    assert out is p
    return t.numpy(), p.data


UNIFORM = [
    ("uniform_", {"a": -0.3, "b": 0.7}, None),
    ("xavier_uniform_", {"gain": 2.0}, lambda fi, fo: 2.0 * math.sqrt(6 / (fi + fo))),
    ("kaiming_uniform_", {}, lambda fi, fo: math.sqrt(6 / fi)),  # a=0: the gain is sqrt(2)
    ("kaiming_uniform_", {"a": math.sqrt(5)}, lambda fi, fo: 1 / math.sqrt(fi)),  # as Linear
    (
        "kaiming_uniform_",
        {"mode": "fan_out", "nonlinearity": "relu"},
        lambda fi, fo: math.sqrt(6 / fo),
    ),
]


@pytest.mark.parametrize("name, kwargs, bound", UNIFORM)
@pytest.mark.parametrize("shape", [(200, 300), (64, 32, 3, 3)])
def test_uniform_fills_share_torchs_bounds(name, kwargs, bound, shape, init):
    ref, got = _bound_and_std(init, name, shape, **kwargs)
    lo, hi = ref.min(), ref.max()
    assert got.min() >= lo - 1e-3 * (hi - lo) and got.max() <= hi + 1e-3 * (hi - lo)
    assert got.min() <= lo + 1e-2 * (hi - lo) and got.max() >= hi - 1e-2 * (hi - lo)
    if bound is not None:
        fi, fo = init.fans(sadl.Parameter(np.zeros(shape)))
        assert np.abs(got).max() <= bound(fi, fo)
    np.testing.assert_allclose(got.std(), ref.std(), rtol=0.03)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("normal_", {"mean": 0.5, "std": 2.0}),
        ("xavier_normal_", {"gain": 0.5}),
        ("kaiming_normal_", {}),
        ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "tanh"}),
        ("trunc_normal_", {"std": 1.5, "a": -1.0, "b": 2.0}),
    ],
)
def test_normal_fills_share_torchs_statistics(name, kwargs, init):
    ref, got = _bound_and_std(init, name, (300, 200), **kwargs)
    np.testing.assert_allclose(got.mean(), ref.mean(), atol=0.02 * ref.std() + 0.01)
    np.testing.assert_allclose(got.std(), ref.std(), rtol=0.03)
    if name == "trunc_normal_":
        assert got.min() >= -1.0 and got.max() <= 2.0


@pytest.mark.parametrize(
    "name, args", [("constant_", (0.3,)), ("ones_", ()), ("zeros_", ()), ("eye_", ())]
)
def test_constant_fills_equal_torch(name, args, init):
    t = torch.empty((3, 5), dtype=torch.float32)
    getattr(torch.nn.init, name)(t, *args)
    p = sadl.Parameter(np.full((3, 5), 7.0, dtype=np.float32))
    getattr(init, name)(p, *args)
    assert p.dtype == np.float32
    np.testing.assert_array_equal(p.data, t.numpy())


def test_generator_makes_draws_reproducible_and_dtype_is_kept(init):
    a, b = sadl.Parameter(np.zeros((4, 3), dtype=np.float32)), sadl.Parameter(np.zeros((4, 3)))
    init.kaiming_uniform_(a, generator=7)
    init.kaiming_uniform_(b, generator=np.random.default_rng(7))
    assert a.dtype == np.float32
    np.testing.assert_allclose(a.data, b.data.astype(np.float32))
    sadl.manual_seed(3)
    init.normal_(a)
    sadl.manual_seed(3)
    init.normal_(b)
    np.testing.assert_allclose(a.data, b.data.astype(np.float32))


def test_errors_are_clear(init):
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(sadl.Parameter(np.zeros(3)))
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        init.kaiming_normal_(sadl.Parameter(np.zeros((2, 2))), mode="fan")
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(TypeError, match="expected a sadl Tensor"):
        init.zeros_(np.zeros(3))
