"""Every registered layer carries examples, and ``sadl.testing.check_layer`` passes on them."""

import pytest
import sadl
from sadl.plugins import LayerDef
from sadl.testing import check_layer
from sadl_layers.modules import LAYERS
from sadl_layers.modules.examples import EXAMPLES


def test_every_layer_has_an_example():
    assert set(EXAMPLES) == set(LAYERS)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_check_layer_passes(name):
    assert getattr(sadl.nn, name) is LAYERS[name]
    report = check_layer(LayerDef(name, LAYERS[name], EXAMPLES[name]))
    assert report.ok and report.results


def test_default_dtype_reaches_new_parameters():
    import numpy as np

    sadl.set_default_dtype(np.float64)
    try:
        layers = [LAYERS["Linear"](3, 2), LAYERS["LayerNorm"](3), LAYERS["Embedding"](4, 3)]
        layers += [LAYERS["Conv2d"](1, 2, 3), LAYERS["CausalSelfAttention"](4, 2)]
        assert {p.dtype for layer in layers for p in layer.parameters()} == {np.dtype(np.float64)}
        assert LAYERS["Linear"](3, 2, dtype=np.float32).weight.dtype == np.float32
    finally:
        sadl.set_default_dtype(np.float32)
    assert LAYERS["Linear"](3, 2).weight.dtype == np.float32
