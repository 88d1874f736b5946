"""Third-party tests run inside the fresh venvs the `thirdparty` nox session builds from wheels."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # This hook sees every collected test of the session, not only this directory's: mark only
    # the tests under tests/thirdparty, so `pytest` from the repository root runs the rest.
    if os.environ.get("SADL_THIRDPARTY_SUITE"):
        return
    skip = pytest.mark.skip(
        reason="runs only in the venvs built by `nox -s thirdparty` (SADL_THIRDPARTY_SUITE set)"
    )
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture
def run_python():
    """Run code in a fresh interpreter of this venv with extra environment variables."""

    def run(code, **env):
        full = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
        full.update(env)
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120
        )

    return run
