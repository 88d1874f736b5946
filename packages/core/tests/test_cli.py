import json
import subprocess
import sys

import pytest
from sadl.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "sadl", *args], capture_output=True, text=True)


def test_plugins_json_lists_core():
    result = run("plugins", "--json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    core = listing[0]
    assert core["name"] == "sadl" and core["status"] == "ok" and core["distribution"] == "sadl-core"


def test_plugins_table_ops_and_info(capsys):
    assert main(["plugins"]) == 0
    assert "sadl-core" in capsys.readouterr().out
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "tanh" in out and "matmul" in out
    assert main(["info"]) == 0
    assert "numpy" in capsys.readouterr().out


def test_check_plugins_runs_the_battery_over_core(capsys):
    assert main(["check-plugins", "--plugin", "sadl"]) == 0
    out = capsys.readouterr().out
    assert "0 failed" in out


def test_unknown_command_exits_nonzero():
    result = run("no-such-command")
    assert result.returncode != 0 and "invalid choice" in result.stderr


@pytest.mark.usefixtures("restore_plugins")
def test_plugin_commands_are_added(capsys):
    import importlib.metadata as md

    import sadl

    sadl._host.reload_plugins(
        entry_points=[md.EntryPoint("good", "fake_plugins.good", "sadl.plugins")]
    )
    assert main(["fake-hello"]) == 0
    assert "hello from fake" in capsys.readouterr().out
