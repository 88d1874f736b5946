"""The device matrix for core's ops: every registered op on every device equals the CPU.

``device`` comes from the device-matrix pytest plugin (sadl-strictcuda): "cpu", the strict CuPy
stand-in "strict", and "cuda" where CuPy sees a GPU. On each, ``check_op(op, device=...)``
runs the op's examples there: outputs stay on the device and equal the CPU's, float64 gradients
and second derivatives equal the CPU's within 1e-6, float32 stays float32, no_grad records
nothing.
"""

import pytest
from sadl._builtin import CORE_OPS
from sadl.testing import check_op


@pytest.mark.parametrize("op", CORE_OPS, ids=lambda op: op.name)
def test_core_op_on_device_matches_cpu(op, device):
    report = check_op(op, device=device, raise_exception=False)
    assert report.ok, str(report)
