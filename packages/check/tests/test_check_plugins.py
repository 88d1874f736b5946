"""``sadl check-plugins``: the command sadl-check adds, over core and over fake plugins."""

import importlib.metadata as md
import sys
from pathlib import Path

import pytest
from sadl.cli import main


def rows(out):
    """The table's rows, split into words."""
    return [line.split() for line in out.splitlines() if line.strip()]


#: sadl-core's fake plugins (good, broken, conflict, the clashes), which these tests share;
#: this suite's own (wronggrad) are in fake_check_plugins.
CORE_TESTS = Path(__file__).parents[2] / "core" / "tests"


def ep(name, package="fake_plugins"):
    return md.EntryPoint(name=name, value=f"{package}.{name}", group="sadl.plugins")


CHECK = md.EntryPoint(name="check", value="sadl_check.commands", group="sadl.plugins")


@pytest.fixture
def plugins(restore_plugins, monkeypatch):
    """Load only sadl-check and the given fake plugins (not strict), for one test."""
    monkeypatch.delenv("SADL_PLUGINS_STRICT", raising=False)
    monkeypatch.delenv("SADL_DISABLE_PLUGINS", raising=False)
    monkeypatch.syspath_prepend(str(CORE_TESTS))

    def load(*eps):
        import warnings

        import sadl

        monkeypatch.setattr(md, "entry_points", lambda group: [CHECK, *eps])
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            sadl.plugins.reload_plugins()

    return load


def test_check_plugins_runs_the_battery_over_core(capsys):
    assert main(["check-plugins", "--plugin", "sadl", "--plugin", "check"]) == 0
    out = capsys.readouterr().out
    assert " 0 failed" in out and ["command", "check-plugins", "check", "1", "ok"] in rows(out)


def test_check_plugins_fails_on_a_broken_or_unknown_plugin(plugins, capsys):
    plugins(ep("broken"), ep("good"))
    assert main(["check-plugins", "--plugin", "broken"]) == 1
    out = capsys.readouterr().out
    assert ["plugin", "broken", "broken", "-", "FAILED:", "error"] in rows(out)
    assert "1 checked, 1 failed" in out
    assert "ModuleNotFoundError" in out
    assert main(["check-plugins", "--plugin", "nope"]) == 2
    assert "no plugin named 'nope'" in capsys.readouterr().err
    assert main(["check-plugins"]) == 1  # every plugin: the broken one fails the run


def test_check_plugins_checks_layers_optimizers_and_commands(plugins, capsys):
    plugins(ep("good"))
    assert main(["check-plugins", "--plugin", "good"]) == 1
    out = capsys.readouterr().out
    table = rows(out)
    assert ["op", "fake_cube", "good", "20", "ok"] in table  # 5 on the example, 15 on variants
    assert ["layer", "Doubler", "good", "1", "FAILED:", "examples", "(1)"] in table
    assert ["optimizer", "Noop", "good", "1", "FAILED:", "step", "(1)"] in table
    assert ["command", "fake-hello", "good", "1", "ok"] in table
    # the optimizer never changes anything: the step check says so
    assert "optimizer Noop: step" in out and "did not change after two steps" in out


def test_check_plugins_names_each_failing_check_once_with_its_count(plugins, capsys):
    plugins(
        ep("wronggrad", "fake_check_plugins")
    )  # a wrong derivative: gradcheck fails on the example and 2 variants
    assert main(["check-plugins", "--plugin", "wronggrad"]) == 1
    out = capsys.readouterr().out
    assert ["op", "fake_wrong_cube", "wronggrad", "20", "FAILED:", "gradcheck", "(3)"] in rows(out)
    assert out.count("fake_wrong_cube: gradcheck") == 3  # each failure detailed below the table


def test_check_plugins_prints_whole_messages_when_verbose(plugins, capsys, monkeypatch):
    plugins(ep("good"))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("COLUMNS", "60")
    main(["check-plugins", "--plugin", "good"])
    short = capsys.readouterr().out
    assert "messages shortened to fit" in short and " ..." in short
    main(["check-plugins", "--plugin", "good", "--verbose"])
    full = capsys.readouterr().out
    assert "shortened" not in full
    assert "add LayerDef(..., examples=(Example(input_shape, **constructor_kwargs),))" in full


def test_check_plugins_fails_on_a_command_whose_help_breaks():
    from sadl_check.commands import _check_commands

    def register_commands(subparsers):
        p = subparsers.add_parser("fake-broken-help", help="%(nonexistent)s")
        p.add_argument("--size", help="%(no_such_key)s")
        p.set_defaults(func=lambda args: 0)

    reports = {name: report for _, name, report in _check_commands(register_commands)}
    assert set(reports) == {"(sadl --help)", "fake-broken-help"}
    assert not any(r.ok for r in reports.values())
    assert "KeyError" in reports["fake-broken-help"].failures()[0].message


def test_check_plugins_fails_on_a_name_two_plugins_claim(plugins, capsys):
    plugins(ep("conflict"), ep("good"))
    assert main(["check-plugins", "--plugin", "conflict"]) == 1
    out = capsys.readouterr().out
    # its own (set-aside) record is checked too, and the check fails saying why it is not served
    row = next(r for r in rows(out) if r[:3] == ["op", "fake_cube", "conflict"])
    assert row[4:7] == ["FAILED:", "served", "(1),"]
    assert "registered by 2 plugins" in out


def test_check_plugins_fails_each_contested_record_and_passes_the_rest(
    plugins, monkeypatch, capsys
):
    # core's clash fixtures: two plugins that register the same name in every kind
    monkeypatch.delenv("SADL_PREFER", raising=False)
    clash = [("alpha", "clash_a"), ("omega", "clash_b")]
    plugins(
        *(md.EntryPoint(name=n, value=f"fake_plugins.{m}", group="sadl.plugins") for n, m in clash)
    )
    assert main(["check-plugins", "--plugin", "alpha"]) == 1
    lines = capsys.readouterr().out.splitlines()
    served = {line.split()[1] for line in lines if "FAILED: served (1)" in line}
    assert served == {
        "clash_op", "a_sinc", "ClashLayer", "ClashOpt", "clash_model", "clash_fmt", "clashdev",
        "clash-cmd",
    }  # fmt: skip
    assert not any("FAILED: served" in line for line in lines if " a_op " in line)
    assert any(line.split()[:2] == ["command", "a-cmd"] and line.endswith("ok") for line in lines)


def test_check_plugins_checks_a_plugins_own_record_of_a_built_in_name_and_fails_it(
    plugins, monkeypatch, capsys
):
    # core_names registers core's tanh, SGD, cuda and info: its own records are set aside
    monkeypatch.delenv("SADL_PREFER", raising=False)
    plugins(ep("core_names"))
    assert main(["check-plugins", "--plugin", "core_names"]) == 1
    out = capsys.readouterr().out
    table = [r for r in rows(out) if r[2:3] == ["core_names"]]
    by_name = {}
    for row in table:
        by_name.setdefault((row[0], row[1]), []).append(row)
    for kind, name in (("op", "tanh"), ("optimizer", "SGD"), ("backend", "cuda")):
        (row,) = by_name[kind, name]
        assert row[4:6] == ["FAILED:", "served"], row  # never core's tanh, reported ok
    # a contested command is listed once, failed, not also as a command whose --help works
    assert by_name["command", "info"] == [
        ["command", "info", "core_names", "1", "FAILED:", "served", "(1)"]
    ]
    assert by_name["command", "core-names-cmd"][0][-1] == "ok"
    assert "the op 'tanh' is sadl-core's built-in" in out
