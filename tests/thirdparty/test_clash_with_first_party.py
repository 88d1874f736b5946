"""From wheels: the first-party plugins and sadl-linclash, whose ``Linear`` clashes with
sadl-layers'.

sadl-linclash has two entry points, ``alinear`` (sorting before every first-party plugin) and
``zlinear`` (after); each test blocks one of them, so it runs in both discovery orders. Only
``Linear`` is set aside: every other name of both plugins, what they serve through core's
namespaces and their commands keep working, and ``sadl plugins`` and ``sadl check-plugins`` say so.
"""

import json
import os
import subprocess
import sys

import pytest

#: the entry point that is loaded -> the one that is blocked
ORDERS = {"alinear": "zlinear", "zlinear": "alinear"}


def sadl_cli(loaded, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    env["SADL_DISABLE_PLUGINS"] = ORDERS[loaded]
    return subprocess.run(
        [sys.executable, "-m", "sadl", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.parametrize("loaded", ORDERS)
def test_sadl_plugins_sets_aside_only_linear(loaded):
    result = sadl_cli(loaded, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    for name in (loaded, "layers"):
        assert plugins[name]["status"] == "conflict"
        assert plugins[name]["conflicts"] == {"register_layers": ["Linear"]}
    for name in ("optim", "serialize", "compile", "models", "check"):
        assert plugins[name]["status"] == "ok", plugins[name]
    assert plugins[ORDERS[loaded]]["status"] == "blocked"
    assert f"{loaded}-info" in plugins[loaded]["provides"]["register_commands"]
    # the clash is one warning line, naming both providers and how to choose
    (line,) = result.stderr.splitlines()
    assert "'Linear' is registered by 2 plugins" in line and "SADL_PREFER=Linear:" in line
    table = sadl_cli(loaded, "plugins")
    assert table.returncode == 0 and "conflict (Linear)" in table.stdout


@pytest.mark.parametrize("loaded", ORDERS)
def test_every_other_name_of_both_plugins_keeps_working(loaded):
    code = f"LOADED = {loaded!r}\n" + (
        "import numpy as np, sadl\n"
        "try:\n"
        "    sadl.nn.Linear\n"
        "except sadl.PluginConflictError as e:\n"
        "    print('contested:', 'layers' in str(e) and LOADED in str(e))\n"
        "x, y = sadl.data.windows(np.arange(50), 4, 2, rng=np.random.default_rng(0))\n"
        "w = sadl.Parameter(sadl.zeros(3))\n"
        "sadl.nn.init.ones_(w)\n"
        "norm = sadl.nn.LayerNorm(3)\n"
        "out = sadl.checkpoint(lambda t: norm(t * w), sadl.ones((2, 3)))\n"
        "print(x.shape, w.numpy().tolist(), out.shape)\n"
        "print(sadl.ops.get(LOADED + '_double')(sadl.ones(2)).numpy().tolist())\n"
        "print(callable(sadl.compile), sadl.models.default_config('gpt')['n_layer'] > 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    env["SADL_DISABLE_PLUGINS"] = ORDERS[loaded]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "contested: True",
        "(2, 4) [1.0, 1.0, 1.0] (2, 3)",
        "[2.0, 2.0]",
        "True True",
    ]


@pytest.mark.parametrize("loaded", ORDERS)
def test_the_commands_of_both_plugins_and_of_those_using_them_run(loaded):
    result = sadl_cli(loaded, f"{loaded}-info")
    assert result.returncode == 0 and result.stdout == f"{loaded}-info from {loaded}\n"
    result = sadl_cli(loaded, "train", "gpt", "--help")
    assert result.returncode == 0, result.stderr
    assert "--checkpoint-activations" in result.stdout


@pytest.mark.parametrize("loaded", ORDERS)
def test_check_plugins_fails_only_the_contested_name(loaded):
    result = sadl_cli(loaded, "check-plugins", "--plugin", loaded)
    assert result.returncode == 1
    rows = {tuple(line.split()[:2]): line for line in result.stdout.splitlines() if line.strip()}
    assert "FAILED: served" in rows["layer", "Linear"]
    assert rows["op", f"{loaded}_double"].endswith(" ok")
    assert rows["command", f"{loaded}-info"].endswith(" ok")
    assert "1 failed" in result.stdout and "registered by 2 plugins" in result.stdout
