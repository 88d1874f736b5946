"""The first op touches nothing it does not need (DESIGN.md §5): tensors, ops and a backward pass
import no command-line module and scan no entry points; the first registry use discovers."""

import subprocess
import sys

FIRST_OP = """
import importlib.metadata, sys

def no_scan(*args, **kwargs):
    raise AssertionError("entry points scanned")

importlib.metadata.entry_points = no_scan
import numpy as np
import sadl

x = sadl.tensor(np.ones(3), requires_grad=True)
loss = (x * x).sum()  # its data is a NumPy scalar turned array: no backend lookup needed
loss.backward()
y = x.exp() + sadl.zeros(3) @ sadl.ones((3, 3))  # (np.exp(x) asks the registry: plugins)
(y.mean() + x.tolist()[0]).backward()
loaded = [m for m in sys.modules if m in ("sadl.cli", "sadl._commands") or m.startswith("sadl_")]
print(loaded, sadl._host._registry is None)
"""

FIRST_REGISTRY_USE = """
import sys
import numpy as np
import sadl

(sadl.tensor(np.ones(3), requires_grad=True) ** 2).sum().backward()
before = sadl._host._registry is None
sadl.nn.names()
print(before, sadl._host._registry is not None, "sadl._commands" in sys.modules)
"""


def _run(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_tensors_ops_and_backward_import_no_cli_and_scan_no_entry_points():
    assert _run(FIRST_OP) == "[] True"


def test_the_first_registry_use_discovers_the_plugins():
    assert _run(FIRST_REGISTRY_USE) == "True True True"
