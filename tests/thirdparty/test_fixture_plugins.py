"""Every fixture plugin installed at once: broken, conflicting, incompatible, misspelled.

The clashes: ``squash`` is registered by conflict, sample and zclash (entry points sorting
before and after sample's), ``Scale`` and ``sample-info`` by sample and zclash, and zclash
registers core's ``SGD`` too.
"""

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
    # the clashes set aside only the contested names, whatever the entry points' order
    assert plugins["conflict"]["status"] == "conflict"
    assert plugins["conflict"]["conflicts"] == {"register_ops": ["squash"]}
    assert plugins["sample"]["status"] == "conflict"
    assert plugins["sample"]["conflicts"] == {
        "register_ops": ["squash"],
        "register_layers": ["Scale"],
        "register_commands": ["sample-info"],
    }
    assert plugins["zclash"]["status"] == "conflict"
    assert plugins["zclash"]["conflicts"] == {
        "register_ops": ["squash"],
        "register_layers": ["Scale"],
        "register_optimizers": ["SGD"],
        "register_commands": ["sample-info"],
    }
    for name in ("conflict", "sample", "zclash"):
        assert "SADL_PREFER=" in plugins[name]["error"]
    # each failure and each clash is warned about once, on stderr
    assert warnings.count("SadlPluginWarning") == 3 + 4
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


def test_conflicting_name_refuses_to_resolve_and_the_rest_works(run_python):
    result = run_python(
        "import sadl\n"
        "for name in ('ops.squash', 'nn.Scale'):\n"
        "    try:\n"
        "        eval('sadl.' + name)\n"
        "    except sadl.PluginConflictError as e:\n"
        "        print(e)\n"
        "opt = sadl.optim.SignSGD([sadl.Parameter(sadl.ones(2))], lr=0.1)\n"
        "print(sadl.ops.zclash_identity(sadl.ones(2)).numpy(), sadl.SGD is sadl.optim.SGD)\n"
        "print(sadl.optim.SGD.__module__)\n"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "3 plugins: 'conflict'" in lines[0] and "'sample'" in lines[0] and "'zclash'" in lines[0]
    assert "2 plugins: 'sample'" in lines[1] and "'zclash'" in lines[1]
    assert lines[2] == "[1. 1.] True" and lines[3].startswith("sadl.")  # core's SGD is kept


def test_sadl_prefer_chooses_a_provider(run_python):
    result = run_python(
        "import sadl; print(sadl.nn.Scale.__module__, sadl.ops.squash(sadl.tensor(3.0)).item())",
        SADL_PREFER="Scale:sample,squash:zclash",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sadl_sample.plugin", "3.0"]  # zclash's is the identity


def test_a_contested_command_is_refused_and_the_others_run():
    def sadl_cli(*args):
        return subprocess.run([sys.executable, "-m", "sadl", *args], capture_output=True, text=True)

    result = sadl_cli("sample-info")
    assert result.returncode == 2
    assert "sadl: error: PluginConflictError: the command 'sample-info'" in result.stderr
    result = sadl_cli("zclash-info")
    assert result.returncode == 0 and result.stdout == "zclash-info from zclash\n"


def test_blocking_the_clashing_plugins_restores_the_sample(run_python):
    plugins, _ = listing(run_python, SADL_DISABLE_PLUGINS="conflict,zclash")
    assert plugins["conflict"]["status"] == plugins["zclash"]["status"] == "blocked"
    assert plugins["sample"]["status"] == "ok"


def test_strict_mode_raises_on_a_load_failure_not_on_a_clash(run_python):
    result = run_python("import sadl; sadl.ops.names()", SADL_PLUGINS_STRICT="1")
    assert result.returncode != 0 and "PluginError" in result.stderr
    result = run_python(
        "import sadl; print(sadl.plugins.plugins()[-1]['status'])",
        SADL_PLUGINS_STRICT="1",
        SADL_DISABLE_PLUGINS="broken,incompatible,typo",
    )
    assert result.returncode == 0 and result.stdout == "conflict\n", result.stderr


def test_cli_shows_the_errors():
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "plugins"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for name in ("broken", "incompatible", "typo", "conflict", "sample", "zclash"):
        assert name in result.stdout
    assert "conflict (squash)" in result.stdout
    assert "conflict (squash, Scale, sample-info)" in result.stdout


def test_each_broken_plugin_and_each_clash_is_one_warning_line_on_the_command_line():
    result = subprocess.run([sys.executable, "-m", "sadl", "info"], capture_output=True, text=True)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 7 and all(line.startswith("sadl: warning: ") for line in lines)
    for name in ("broken", "incompatible", "typo"):
        assert sum(f"plugin '{name}'" in line for line in lines) == 1, result.stderr
    for name in ("'squash'", "'Scale'", "'SGD'", "'sample-info'"):
        assert sum(name in line for line in lines) == 1, result.stderr


def test_check_plugins_fails_on_a_plugin_that_did_not_load():
    def check(*args):
        return subprocess.run(
            [sys.executable, "-m", "sadl", "check-plugins", *args], capture_output=True, text=True
        )

    result = check("--plugin", "typo")
    assert result.returncode == 1
    assert "FAILED: error" in result.stdout and "register_layer" in result.stdout
    assert check("--plugin", "no-such-plugin").returncode == 2
    result = check("--plugin", "conflict")  # loaded, but its squash is claimed three times
    assert result.returncode == 1 and "registered by 3 plugins" in result.stdout
