"""Names that left core for a plugin package keep working through it, and say how to get it."""

import os
import subprocess
import sys

import pytest

CASES = [
    (
        "check",
        "import sadl; sadl.testing.check_op",
        "'sadl.testing.check_op' is provided by sadl-check",
    ),
    ("check", "import sadl; sadl.viz.to_dot", "'sadl.viz.to_dot' is provided by sadl-check"),
    ("layers", "import sadl; sadl.checkpoint", "'sadl.checkpoint' is provided by sadl-layers"),
    ("layers", "import sadl; sadl.data.windows", "'sadl.data.windows' is provided by sadl-layers"),
    (
        "serialize",
        "import sadl; sadl.io.load_pysadl",
        "'sadl.io.load_pysadl' is provided by sadl-serialize",
    ),
]


@pytest.mark.parametrize(("blocked", "code", "message"), CASES, ids=[c[1][13:] for c in CASES])
def test_a_moved_name_without_its_package_names_the_package(blocked, code, message):
    env = {**os.environ, "SADL_DISABLE_PLUGINS": blocked}
    env.pop("SADL_PLUGINS_STRICT", None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr


def test_a_moved_name_is_served_by_its_package():
    pytest.importorskip("sadl_check")
    import sadl
    import sadl_check

    assert sadl.testing.check_op is sadl_check.check_op
    assert sadl.viz.to_dot is sadl_check.viz.to_dot


def test_the_tensors_own_methods_and_numpy_functions_need_no_plugin():
    code = (
        "import sadl, numpy as np; x = sadl.tensor([[0.5, 2.0]], requires_grad=True); "
        "y = x.erf().sum() + x.tril().sum() + x.prod() + x.clip(0, 1).sum() + x.std() + "
        "np.var(x) + np.multiply.reduce(x, axis=None) + (x % 0.3).sum(); y.backward(); "
        "print(x.grad.shape)"
    )
    env = {**os.environ, "SADL_DISABLE_PLUGINS": "layers"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(1, 2)"
