"""People arriving from py-sadl (and autodidact): their README code runs unchanged, their model
files load, and what they type finds sadl's names (docs/compat.md)."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sadl

HERE = Path(__file__).parent
PYSADL = HERE / "fixtures" / "pysadl"

# py-sadl 2.0.0's README, Quick Start, verbatim.
PYSADL_QUICK_START = """
import sadl
import numpy as np

# Create tensors
x = sadl.tensor([[1.0, 2.0], [3.0, 4.0]])

# Build a model
model = sadl.Mlp([
    sadl.Linear(dim_in=2, dim_out=4),
    sadl.ReLU(),
    sadl.Linear(dim_in=4, dim_out=1),
])

# Forward pass
output = model(x)
loss = np.sum(output)

# Backward pass and optimization
optimizer = sadl.SGD(model.get_parameters(), lr=0.01)
optimizer.backward(loss)
optimizer.step()
optimizer.zero_grad()
"""

# The Quick Start of the py-sadl README before 2.0 (``list(model.parameters)``, a property).
PYSADL_EARLIER_QUICK_START = """
import sadl

# Create tensors
x = sadl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)

# Build a model
model = sadl.Mlp([
    sadl.Linear(dim_in=2, dim_out=4),
    sadl.ReLU(),
    sadl.Linear(dim_in=4, dim_out=1),
])

# Forward pass
output = model(x)
loss = output.sum()

# Backward pass and optimization
optimizer = sadl.SGD(list(model.parameters), lr=0.01)
optimizer.backward(loss)
optimizer.step()
optimizer.zero_grad()
"""

# py-sadl's README, "Mathematical Functions as First-Class Citizens", verbatim. The names it
# assumes come from the imports docs/compat.md gives: ``import numpy as xp`` and
# ``from sadl import Function, Tensor``.
PYSADL_FUNCTION = """
class Sigmoid(Function):
    def __call__(self, x: Tensor) -> Tensor:
        return 1 / (xp.exp(-x) + 1)
"""
COMPAT = HERE.parent / "docs" / "compat.md"


@pytest.mark.parametrize("snippet", [PYSADL_QUICK_START, PYSADL_EARLIER_QUICK_START])
def test_py_sadl_quick_start_runs_unchanged_and_trains(snippet):
    namespace: dict[str, object] = {}
    exec(compile(snippet, "py-sadl README", "exec"), namespace)
    model = namespace["model"]
    x = namespace["x"]
    before = float(np.sum(namespace["output"].numpy()))
    assert float(np.sum(model(x).numpy())) != before  # the step changed the weights
    assert all(p.grad is None for p in model.parameters())  # zero_grad


def compat_block(starting):
    """The ```python block of docs/compat.md that starts with ``starting``."""
    blocks = re.findall(r"^```python\n(.*?)^```", COMPAT.read_text(), re.S | re.M)
    return next(b for b in blocks if b.startswith(starting))


def test_py_sadl_function_subclass_runs_unchanged_on_every_device(device):
    # The imports compat.md gives for py-sadl's `xp`, then the README's class verbatim (the
    # page shows the same class), on the CPU, the strict CuPy stand-in and a GPU where present.
    shown = compat_block("import numpy as xp\n")
    imports, _, cls = shown.partition("\n\n\n")
    assert cls.strip() == PYSADL_FUNCTION.strip()
    namespace: dict[str, object] = {}
    exec(compile(imports + "\n" + PYSADL_FUNCTION, "py-sadl README", "exec"), namespace)
    assert namespace["xp"] is np
    x = sadl.tensor([-1.0, 0.0, 2.0], requires_grad=True, device=device)
    y = namespace["Sigmoid"]()(x)
    assert y.device == x.device and sadl.backends.array_module(y) is sadl.backends.array_module(x)
    y.sum().backward()
    expected = 1 / (1 + np.exp(-np.array([-1.0, 0.0, 2.0])))
    np.testing.assert_allclose(sadl.tensor(y, device="cpu").numpy(), expected, rtol=1e-6)
    grad = sadl.tensor(x.grad).to("cpu").numpy()  # x.grad: an array of x's device
    np.testing.assert_allclose(grad, expected * (1 - expected), rtol=1e-6)
    assert sadl.backends.device_of(x.grad) == x.device


def test_a_host_array_in_a_device_computation_is_refused_naming_both(device):
    # py-sadl's ReLU made its constant with xp.array([0]); under sadl that is a CPU array,
    # which a device computation refuses (compat.md says to write 0 instead).
    x = sadl.tensor([-1.0, 2.0], device=device)
    np.testing.assert_array_equal(np.maximum(x, 0).to("cpu").numpy(), [0.0, 2.0])
    if device != "cpu":
        with pytest.raises(RuntimeError, match="expected all tensors on one device, found cpu"):
            np.maximum(np.array([0]), x)


def test_autodidact_code_runs_after_the_documented_imports():
    page = COMPAT.read_text()
    top = page[: page.index("## py-sadl")]
    assert "import sadl as ad\nfrom sadl import nn, optim\n" in top  # said at the top
    assert "The `autodidact` on PyPI is another project" in top
    example = compat_block("import numpy as np\nimport sadl as ad\nfrom sadl import nn, optim\n")
    namespace: dict[str, object] = {}
    exec(compile(example, "compat.md", "exec"), namespace)
    assert namespace["loss"].item() > 0 and namespace["model"](namespace["x"]).shape == (16, 3)


def equivalent_mlp():
    return sadl.Mlp(
        [sadl.Linear(dim_in=2, dim_out=4), sadl.ReLU(), sadl.Linear(dim_in=4, dim_out=1)]
    )


def test_a_py_sadl_model_file_loads_into_the_equivalent_sadl_model():
    # mlp.sadl was written by py-sadl 2.0.0 itself (fixtures/pysadl/make_pysadl_model.py), with
    # an input and py-sadl's output for it in mlp_io.sadl.
    model = sadl.io.load_pysadl(PYSADL / "mlp.sadl", equivalent_mlp())
    io = sadl.load(PYSADL / "mlp_io.sadl")
    np.testing.assert_allclose(model(io["x"]).numpy(), io["y"].numpy(), rtol=1e-5, atol=1e-6)


def test_and_back_byte_for_byte(tmp_path):
    model = sadl.io.load_pysadl(PYSADL / "mlp.sadl", equivalent_mlp())
    sadl.io.save_pysadl(model, tmp_path / "back.sadl")
    assert (tmp_path / "back.sadl").read_bytes() == (PYSADL / "mlp.sadl").read_bytes()


def test_a_model_that_does_not_match_is_an_error_naming_the_pair():
    wider = sadl.Mlp([sadl.Linear(dim_in=2, dim_out=5), sadl.ReLU(), sadl.Linear(5, 1)])
    with pytest.raises(ValueError, match=r"'layers\[0\].W' has shape \(4, 2\).*'0.weight'"):
        sadl.io.load_pysadl(PYSADL / "mlp.sadl", wider)
    with pytest.raises(ValueError, match="do not match the 2 parameters"):
        sadl.io.load_pysadl(PYSADL / "mlp.sadl", sadl.nn.Linear(2, 4))


def test_model_classes_by_class_name():
    assert sadl.models.GPT is sadl.nn.GPT is sadl.models.gpt
    model = sadl.models.create("GPT", vocab_size=11, block_size=8, n_layer=1, n_head=1, n_embd=8)
    assert isinstance(model, sadl.models.GPT)
    assert "GPT" in dir(sadl.models) and "gpt" in sadl.models.names()


def run_python(code, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full
    )


def test_a_blocked_provider_is_named_with_the_whole_reason():
    result = run_python(
        """
        import sadl
        try:
            sadl.nn.Linear
        except AttributeError as e:
            print(e)
        """,
        SADL_DISABLE_PLUGINS="layers",
    )
    assert result.stdout.strip() == (
        "no layer named 'Linear' is registered; 'Linear' is provided by sadl-layers, whose "
        "plugin 'layers' is blocked by SADL_DISABLE_PLUGINS=layers (remove 'layers' from it)"
    )


def test_version_lists_every_first_party_plugin():
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for dist in ("sadl-layers", "sadl-optim", "sadl-serialize", "sadl-models"):
        assert f"  {dist} 0." in result.stdout


@pytest.mark.parametrize(
    "command, plugin, distribution",
    [
        ("train", "models", "sadl-models"),
        ("generate", "models", "sadl-models"),
        ("inspect", "serialize", "sadl-serialize"),
        ("launch", "distributed", "sadl-distributed"),
    ],
)
def test_a_blocked_plugins_command_names_its_package(command, plugin, distribution):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    env["SADL_DISABLE_PLUGINS"] = plugin
    result = subprocess.run(
        [sys.executable, "-m", "sadl", command], capture_output=True, text=True, env=env
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"sadl: error: 'sadl {command}' is a command of {distribution}, whose plugin "
        f"{plugin!r} is blocked by SADL_DISABLE_PLUGINS={plugin} (remove {plugin!r} from it)\n"
    )


HIDE_OPTIONAL = """
import sys


class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("sadl_distributed", "sadl_strictcuda"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, Hide())
"""


def test_without_the_optional_packages_their_tests_are_skipped_saying_why(tmp_path):
    # A contributor venv without sadl-distributed and the strict CuPy stand-in (the README's
    # old Developing line): the root pytest used to stop at collection. Here they are hidden
    # (sitecustomize makes importing them fail, as if not installed).
    (tmp_path / "sitecustomize.py").write_text(HIDE_OPTIONAL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    env.update(PYTHONPATH=str(tmp_path), SADL_DISABLE_PLUGINS="distributed,strictcuda")
    # No pytest plugin from entry points: the stand-in's is absent too, and pytest would import
    # the plugins' packages past the hiding finder (to rewrite their asserts).
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    root = HERE.parent
    pytest_ = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
    listing = subprocess.run(
        [*pytest_, "--co", "packages/distributed/tests", "tests/test_strict_standin.py"],
        cwd=root, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert listing.returncode == 5, listing.stdout + listing.stderr  # 5: nothing to run
    assert "SKIPPED [11] packages/distributed/tests/conftest.py" in listing.stdout
    assert "sadl-distributed is not installed: .venv/bin/python -m pip install -r " in (
        listing.stdout
    )
    assert "tests/test_strict_standin.py:11: the strict CuPy stand-in" in listing.stdout
    # A package's device tests: the CPU rows run, the device rows are skipped, saying why.
    run = subprocess.run(
        [*pytest_, "packages/optim/tests/test_optim_devices.py"],
        cwd=root, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"\d+ passed, \d+ skipped", run.stdout), run.stdout
    assert "the strict CuPy stand-in (tests/fixtures/plugins/sadl-strictcuda) is not installed" in (
        run.stdout
    )


def requirement_paths(name):
    """The local paths a requirements file of the repository root installs (extras dropped)."""
    lines = (HERE.parent / name).read_text().splitlines()
    found = [line.split("#")[0].strip().removeprefix("-e").strip() for line in lines]
    return {re.sub(r"\[.*\]$", "", p).removeprefix("./") for p in found if p.startswith("./")}


def test_the_requirements_files_install_every_package():
    packages = {
        str(p.parent.relative_to(HERE.parent))
        for p in HERE.parent.glob("packages/*/pyproject.toml")
    }
    dev = requirement_paths("requirements-dev.txt")
    missing = ", ".join(f"-e ./{p}" for p in sorted(packages - dev))
    assert not missing, f"add to requirements-dev.txt: {missing}"
    assert {"tests/fixtures/plugins/sadl-strictcuda", "tests/fixtures/plugins/sadl-sample"} <= dev
    # The set-up line's: every package but sadl-distributed, which needs MPI (README, Install).
    users = requirement_paths("requirements.txt")
    missing = ", ".join(f"./{p}" for p in sorted(packages - users - {"packages/distributed"}))
    assert not missing, f"add to requirements.txt: {missing}"
    assert users <= packages
