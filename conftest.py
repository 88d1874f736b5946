"""What the root ``pytest`` needs when the strict CuPy stand-in is not installed.

Every package's device tests take the ``device`` argument (and some ``cuda_device``) of the
device matrix, which the stand-in's pytest plugin (tests/fixtures/plugins/sadl-strictcuda)
provides. Without it the CPU rows still run, and the device rows are reported as skipped with
the command that installs it, instead of failing with "fixture 'device' not found".
"""

import pytest

NO_STAND_IN = (
    "the strict CuPy stand-in (tests/fixtures/plugins/sadl-strictcuda) is not installed: "
    ".venv/bin/python -m pip install -r requirements-dev.txt"
)

try:
    import sadl_strictcuda  # noqa: F401  (its pytest plugin provides the fixtures)
except ImportError:

    @pytest.fixture(params=["cpu", "strict"])
    def device(request):
        """The device matrix without the stand-in: the CPU, and a skipped device row."""
        if request.param != "cpu":
            pytest.skip(NO_STAND_IN)
        return request.param

    @pytest.fixture
    def cuda_device():
        """No GPU stand-in to pose as CUDA."""
        pytest.skip(NO_STAND_IN)
