"""Fixtures shared by sadl-distributed's in-process tests.

Without sadl-distributed installed (a contributor venv of some packages only), every test module
here is reported as skipped, with the reason and the command that installs it, instead of
stopping the root ``pytest`` at collection.
"""

import pytest

ABSENT = (
    "sadl-distributed is not installed: .venv/bin/python -m pip install -r requirements-dev.txt"
)

try:
    import sadl_distributed as dist
except ImportError:

    class _Absent(pytest.Module):
        def collect(self):
            pytest.skip(ABSENT)

    def pytest_pycollect_makemodule(module_path, parent):
        return _Absent.from_parent(parent, path=module_path)

else:

    @pytest.fixture
    def world_of_one():
        """A fresh in-process world of one rank for the test, shut down after it."""
        dist.shutdown()
        dist.init("local")
        yield
        dist.shutdown()
