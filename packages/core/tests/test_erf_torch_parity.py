"""PyTorch parity of the erf family (``erf``, ``erfc``, ``erfinv``, ``ndtr``, also as
``Tensor.erf`` ...): forward, backward and double backward in float64, float32 forward."""

import numpy as np
import pytest
import sadl
from test_selection_ops_torch_parity import RNG, check, normal  # the one torch-parity checker

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv"])
def test_erf_family(name):
    x = RNG.uniform(-0.95, 0.95, size=(4, 6)) if name == "erfinv" else normal(4, 6) * 2
    check(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), x)
    x32 = x.astype(np.float32)
    ours = getattr(sadl.tensor(x32), name)()
    assert ours.dtype == np.float32
    np.testing.assert_allclose(
        ours.numpy(), getattr(torch.tensor(x32), name)().numpy(), rtol=2e-6, atol=1e-7
    )


def test_ndtr_is_torch_special_ndtr():
    ndtr = sadl.ops.ndtr
    x = normal(4, 6) * 3
    check(lambda t: ndtr(t), lambda t: torch.special.ndtr(t), x)
    x32 = x.astype(np.float32)
    ours = ndtr(sadl.tensor(x32))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(
        ours.numpy(), torch.special.ndtr(torch.tensor(x32)).numpy(), rtol=2e-6, atol=1e-7
    )
