"""The layout and selection methods with a NumPy name (roll, tril, nonzero...) are reachable
through NumPy, and their ops are registered and differentiable."""

import numpy as np
import pytest
import sadl

X = np.arange(1.0, 13.0).reshape(3, 4) / 13.0
ARGS = {"repeat": (2,), "tile": (2,), "roll": (1,)}


@pytest.mark.parametrize(
    "name", ["argwhere", "diagonal", "nonzero", "repeat", "roll", "tile", "trace", "tril", "triu"]
)
def test_every_method_with_a_numpy_name_is_reachable_through_numpy(name):
    t = sadl.Tensor(X)
    args = ARGS.get(name, ())
    via_method = getattr(t, name)(*args)
    via_numpy = getattr(np, name)(t, *args)
    if isinstance(via_method, tuple):  # nonzero: one index array per axis
        assert len(via_numpy) == len(via_method)
        via_method, via_numpy = via_method[0], via_numpy[0]
    assert isinstance(via_numpy, sadl.Tensor), f"np.{name}(t) did not return a Tensor"
    np.testing.assert_allclose(
        np.asarray(via_numpy.data, float), np.asarray(via_method.data, float)
    )


@pytest.mark.parametrize("name", ["roll", "repeat", "tile", "tril", "triu", "diagonal"])
def test_required_op_is_registered_and_differentiable(name):
    assert sadl.ops.get(name).differentiable
