"""sadl-core plus the sample plugin, pip-installed from wheels into a fresh venv."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np


def test_only_core_and_sample_are_installed():
    from importlib.metadata import distributions

    names = {d.metadata["Name"] for d in distributions()}
    assert "sadl-core" in names and "sadl-sample" in names
    assert not names & {
        "sadl-layers",
        "sadl-optim",
        "sadl-models",
        "sadl-serialize",
        "sadl-compile",
        "sadl-check",
    }


def test_sadl_compile_without_sadl_compile_says_which_package_to_install():
    import pytest
    import sadl

    with pytest.raises(
        AttributeError,
        match="'sadl.compile' is provided by sadl-compile, which is not installed: .*install",
    ):
        sadl.compile  # noqa: B018
    with pytest.raises(
        ImportError, match="'sadl.compile' is provided by sadl-compile, which is not installed"
    ):
        from sadl import compile  # noqa: F401


def test_op_with_first_and_second_order_gradients():
    import sadl

    x = sadl.tensor([0.5, -2.0], dtype=np.float64, requires_grad=True)
    y = sadl.ops.squash(x)
    np.testing.assert_allclose(y.data, x.data / (1 + np.abs(x.data)))
    (g,) = sadl.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.data, 1 / (1 + np.abs(x.data)) ** 2)
    (gg,) = sadl.grad(g.sum(), x)
    np.testing.assert_allclose(gg.data, -2 * np.sign(x.data) / (1 + np.abs(x.data)) ** 3)
    assert sadl.testing.gradcheck(sadl.ops.get("squash"), x.data.copy())
    assert sadl.testing.gradgradcheck(sadl.ops.get("squash"), x.data.copy())


def test_check_op_without_sadl_check_says_which_package_to_install():
    import pytest
    import sadl

    with pytest.raises(
        AttributeError,
        match="'sadl.testing.check_op' is provided by sadl-check, which is not installed",
    ):
        sadl.testing.check_op  # noqa: B018
    with pytest.raises(AttributeError, match="'sadl.viz.to_dot' is provided by sadl-check"):
        sadl.viz.to_dot  # noqa: B018


def test_nn_init_without_sadl_layers_says_which_package_to_install():
    import pytest
    from sadl.nn import init

    with pytest.raises(
        AttributeError,
        match="'sadl.nn.init.normal_' is provided by sadl-layers, which is not installed",
    ):
        init.normal_  # noqa: B018


def test_layer_and_optimizer_through_namespaces():
    import sadl

    layer = sadl.nn.Scale(3)
    assert sadl.Scale is sadl.nn.Scale
    opt = sadl.optim.SignSGD(layer.parameters(), lr=0.5)
    loss = (layer(sadl.ones(2, 3)) ** 2).sum()
    loss.backward()
    opt.step()
    np.testing.assert_allclose(layer.weight.data, np.full(3, 0.5))


def test_cli_lists_the_plugin_and_its_command():
    listing = json.loads(
        subprocess.run(
            [sys.executable, "-m", "sadl", "plugins", "--json"], capture_output=True, text=True
        ).stdout
    )
    sample = next(p for p in listing if p["name"] == "sample")
    assert sample["status"] == "ok" and sample["distribution"] == "sadl-sample"
    assert sample["provides"]["register_ops"] == ["squash"]
    console_script = Path(sys.executable).parent / "sadl"
    out = subprocess.run([str(console_script), "sample-info"], capture_output=True, text=True)
    assert out.returncode == 0 and "squash" in out.stdout


def test_blocking_hides_everything_it_provides(run_python):
    result = run_python(
        "import sadl\n"
        "assert 'squash' not in sadl.ops.names()\n"
        "assert not hasattr(sadl.nn, 'Scale') and not hasattr(sadl.optim, 'SignSGD')\n"
        "status = {p['name']: p['status'] for p in sadl.plugins.plugins()}\n"
        "assert status['sample'] == 'blocked', status\n",
        SADL_DISABLE_PLUGINS="sample",
    )
    assert result.returncode == 0, result.stderr


def test_import_stays_silent(run_python):
    result = run_python("import sadl")
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_check_plugins_without_sadl_check_names_the_package():
    # check-plugins comes from sadl-check (a plugin author installs it); here it is absent.
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "check-plugins", "--plugin", "sample"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "sadl: error: 'sadl check-plugins' is a command of sadl-check, which is not installed: "
    )


def test_a_missing_package_is_named_with_a_command_that_works_here(run_python):
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "train", "gpt"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        "sadl: error: 'sadl train' is a command of sadl-models, which is not installed: "
    )
    # Installed from wheels, away from any checkout: say where the command works, with the
    # installer this interpreter has (pip, or uv in a venv without pip).
    from sadl.plugins import install_command

    command = install_command("sadl-models")
    assert command.endswith(" packages/models (run it in a clone of the sadl repository)")
    assert result.stderr.rstrip().endswith(command)
    assert shutil.which(command.split()[0]), f"{command!r} names a tool that is not here"
    result = run_python("import sadl; sadl.optim.AdamW")
    assert "'AdamW' is provided by sadl-optim, which is not installed" in result.stderr
