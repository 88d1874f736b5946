import numpy as np
import pytest
import sadl


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def restore_plugins():
    """Tests that reload plugins with fake entry points put the real ones back afterwards."""
    yield
    sadl.plugins.reload_plugins()
