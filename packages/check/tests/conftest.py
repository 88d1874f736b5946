import os

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
    saved = {
        k: os.environ.pop(k)
        for k in ("SADL_DISABLE_PLUGINS", "SADL_PLUGINS_STRICT")
        if k in os.environ
    }
    try:
        sadl.plugins.reload_plugins()
    finally:
        os.environ.update(saved)
