"""sadl-kernels' tests import their shared helpers (kernel_cases) from this directory."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a longer run (still part of CI)")
