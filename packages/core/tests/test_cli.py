import json
import os
import subprocess
import sys

import pytest
from sadl.cli import main


def rows(out):
    """The table's rows as lists of cells."""
    return [line.split() for line in out.splitlines()]


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


def test_info_names_the_cpu_and_the_blas(capsys):
    from sadl._threads import cpu_model

    assert main(["info"]) == 0
    out = capsys.readouterr().out.splitlines()
    cpu = next(line for line in out if line.startswith("cpu "))
    blas = next(line for line in out if line.startswith("blas "))
    assert cpu.split(None, 1)[1] == cpu_model() and cpu_model()
    pytest.importorskip("threadpoolctl", reason="the BLAS line is threadpoolctl's view")
    from threadpoolctl import threadpool_info

    pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert all(p["internal_api"] in blas and p["version"] in blas for p in pools), blas


def test_unknown_command_exits_2():
    result = run("no-such-command")
    assert result.returncode == 2 and "invalid choice" in result.stderr


@pytest.mark.usefixtures("restore_plugins")
def test_plugin_commands_are_added(capsys):
    import importlib.metadata as md

    import sadl

    sadl._host.reload_plugins(
        entry_points=[md.EntryPoint("good", "fake_plugins.good", "sadl.plugins")]
    )
    assert main(["fake-hello"]) == 0
    assert "hello from fake" in capsys.readouterr().out


# ---------------------------------------------------------------- one scheme for every command
def ep(name, module=None):
    import importlib.metadata as md

    return md.EntryPoint(name=name, value=f"fake_plugins.{module or name}", group="sadl.plugins")


@pytest.fixture
def plugins(restore_plugins, monkeypatch):
    """Load only the given fake plugins (not strict), for one test."""
    monkeypatch.delenv("SADL_PLUGINS_STRICT", raising=False)
    monkeypatch.delenv("SADL_DISABLE_PLUGINS", raising=False)

    def load(*eps):
        import warnings

        import sadl

        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            return sadl._host.reload_plugins(entry_points=list(eps))

    return load


def test_usage_errors_are_one_line_with_status_2(capsys):
    assert main(["ops", "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert err == "sadl ops: error: unrecognized arguments: --no-such-option\n"
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'no-such-command'" in err
    assert "usage:" not in err


def test_version_lists_core_and_plugins(capsys):
    import sadl

    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sadl-core {sadl.__version__} (plugin API")


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "plugins" in capsys.readouterr().out


def test_an_unexpected_error_is_one_line_and_status_1_or_a_traceback_with_verbose(
    plugins, capsys, monkeypatch
):
    import sadl._commands as commands

    def boom(args):
        raise ZeroDivisionError("the op table\nis on fire")

    monkeypatch.setattr(commands, "_cmd_ops", boom)
    plugins()
    assert main(["ops"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "sadl ops: error: ZeroDivisionError: the op table is on fire "
        "(run with --verbose for the traceback)\n"
    )
    assert main(["--verbose", "ops"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("ZeroDivisionError: the op table is on fire\n")


def test_a_command_of_a_missing_package_names_it_and_how_to_install(plugins, capsys):
    plugins()  # only core: no sadl-models, no sadl-serialize
    assert main(["train", "gpt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sadl: error: 'sadl train' is a command of sadl-models, which is not ")
    assert "install" in err and err.count("\n") == 1
    assert main(["inspect", "x.sadl"]) == 2
    assert "sadl-serialize" in capsys.readouterr().err


def test_a_broken_plugin_is_one_warning_line_on_the_command_line(tmp_path):
    # A fake distribution whose entry point cannot be imported, on a fresh interpreter.
    dist = tmp_path / "sadl_fake_broken-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sadl-fake-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[sadl.plugins]\nfakebroken = no_such_module_xyz\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("SADL_PLUGINS_STRICT", None)
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "info"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sadl: warning: sadl plugin 'fakebroken' (sadl-fake-broken 0.1) ")
    assert "No module named 'no_such_module_xyz'" in lines[0] and "sadl plugins" in lines[0]
    assert " (at " not in lines[0]  # no internal paths; `sadl plugins` has the details


def test_plugins_passes_without_the_compiler_names_the_package():
    """``sadl plugins --passes`` runs sadl-compile's ``passes`` command; blocked, it says so."""
    env = {**os.environ, "SADL_DISABLE_PLUGINS": "compile,kernels"}
    env.pop("SADL_PLUGINS_STRICT", None)
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "plugins", "--passes"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 2, result.stdout
    assert "sadl plugins: error: --passes lists sadl-compile's passes" in result.stderr
