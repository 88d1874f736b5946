"""Every fixture plugin installed at once: broken, conflicting, incompatible, misspelled."""

import json
import subprocess
import sys

LIST = "import sadl, json; print(json.dumps(sadl.plugins.plugins()))"


def listing(run_python, **env):
    result = run_python(LIST, **env)
    assert result.returncode == 0, result.stderr
    return {p["name"]: p for p in json.loads(result.stdout)}, result.stderr


def test_statuses_are_recorded_and_attributed(run_python):
    plugins, warnings = listing(run_python)
    assert plugins["broken"]["status"] == "error"
    assert "sadl_broken_dependency_that_does_not_exist" in plugins["broken"]["error"]
    assert plugins["incompatible"]["status"] == "incompatible"
    assert "2.0" in plugins["incompatible"]["error"]
    assert plugins["typo"]["status"] == "error" and "register_layer" in plugins["typo"]["error"]
    assert plugins["typo"]["error"].count("register_layers") >= 1  # the suggestion
    # sample and conflict both register softsign: the later one (by name) is an error naming both
    assert plugins["conflict"]["status"] == "ok"
    assert plugins["sample"]["status"] == "error"
    assert "conflict" in plugins["sample"]["error"] and "sample" in plugins["sample"]["error"]
    # each failure is warned about once, on stderr, and everything else keeps working
    assert warnings.count("SadlPluginWarning") == 4
    assert plugins["sadl"]["status"] == "ok"


def test_everything_else_keeps_working_and_import_is_silent(run_python):
    result = run_python(
        "import sadl, numpy as np\n"
        "x = sadl.tensor([1.0, 2.0], requires_grad=True)\n"
        "(np.tanh(x) * x).sum().backward()\n"
        "assert x.grad is not None\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    result = run_python("import sadl")
    assert result.stdout == "" and result.stderr == ""


def test_conflicting_name_refuses_to_resolve(run_python):
    result = run_python(
        "import sadl\n"
        "try:\n"
        "    sadl.ops.softsign\n"
        "except sadl.PluginConflictError as e:\n"
        "    print(e)\n"
    )
    assert "sample" in result.stdout and "conflict" in result.stdout


def test_blocking_the_conflict_restores_the_sample(run_python):
    plugins, _ = listing(run_python, SADL_DISABLE_PLUGINS="conflict")
    assert plugins["conflict"]["status"] == "blocked"
    assert plugins["sample"]["status"] == "ok"


def test_strict_mode_raises(run_python):
    result = run_python("import sadl; sadl.ops.names()", SADL_PLUGINS_STRICT="1")
    assert result.returncode != 0
    assert "PluginError" in result.stderr or "PluginConflictError" in result.stderr


def test_cli_shows_the_errors():
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "plugins"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for name in ("broken", "incompatible", "typo", "conflict", "sample"):
        assert name in result.stdout


def test_each_broken_plugin_is_one_warning_line_on_the_command_line():
    result = subprocess.run([sys.executable, "-m", "sadl", "info"], capture_output=True, text=True)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 4 and all(line.startswith("sadl: warning: ") for line in lines)
    for name in ("broken", "incompatible", "typo", "sample"):
        assert sum(f"plugin '{name}'" in line for line in lines) == 1, result.stderr


def test_check_plugins_fails_on_a_plugin_that_did_not_load():
    def check(*args):
        return subprocess.run(
            [sys.executable, "-m", "sadl", "check-plugins", *args], capture_output=True, text=True
        )

    result = check("--plugin", "typo")
    assert result.returncode == 1
    assert "FAILED: error" in result.stdout and "register_layer" in result.stdout
    assert check("--plugin", "no-such-plugin").returncode == 2
    result = check("--plugin", "conflict")  # loaded, but its softsign is claimed twice
    assert result.returncode == 1 and "registered by two plugins" in result.stdout
