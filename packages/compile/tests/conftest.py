import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _without_kernels(request, monkeypatch):
    """sadl-compile's tests check its own passes, exact to eager; sadl-kernels' (fusion passes
    too, when installed) round the softmax, the norms and GELU within their tolerances, tested
    in sadl-kernels. The fuzz programs run with and without them (``nox -s fuzz``)."""
    if request.path.name != "test_compile_fuzz.py":
        monkeypatch.setenv("SADL_KERNELS", "0")
