"""The plugin manager: isolation, attribution, blocking, strict mode, conflicts, namespaces."""

import importlib.metadata as md
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import sadl
from sadl import _host as manager
from sadl.plugins import (
    IncompatiblePluginError,
    PluginConflictError,
    PluginError,
    SadlPluginWarning,
    UnknownNameError,
)

pytestmark = pytest.mark.usefixtures("restore_plugins")


def ep(name, module=None):
    return md.EntryPoint(name=name, value=f"fake_plugins.{module or name}", group="sadl.plugins")


def load(*eps, monkeypatch=None, strict=False):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = manager.reload_plugins(entry_points=list(eps))
    return reg, caught


@pytest.fixture(autouse=True)
def not_strict(monkeypatch):
    monkeypatch.delenv("SADL_PLUGINS_STRICT", raising=False)
    monkeypatch.delenv("SADL_DISABLE_PLUGINS", raising=False)


def status(reg, name):
    return next(p for p in reg.plugins if p.name == name)


def test_good_plugin_provides_op_layer_optimizer_and_command():
    reg, caught = load(ep("good"))
    assert not caught
    x = sadl.tensor([2.0], dtype=np.float64, requires_grad=True)
    y = sadl.ops.fake_cube(x)
    (g,) = sadl.grad(y.sum(), x, create_graph=True)
    (gg,) = sadl.grad(g.sum(), x)
    assert float(g.data[0]) == 12.0 and float(gg.data[0]) == 12.0
    assert sadl.nn.Doubler()(x).data[0] == 4.0
    assert sadl.Doubler is sadl.nn.Doubler and sadl.optim.Noop is sadl.Noop
    assert "fake_cube" in dir(sadl.ops) and "Doubler" in dir(sadl.nn)
    info = status(reg, "good")
    assert info.status == "ok"
    assert info.provides["register_ops"] == ["fake_cube"]
    assert reg.provider("ops", "fake_cube") is info


def test_broken_plugin_is_isolated_and_warned_once():
    reg, caught = load(ep("broken"), ep("good"))
    assert status(reg, "broken").status == "error"
    assert "ModuleNotFoundError" in status(reg, "broken").error
    assert status(reg, "good").status == "ok"
    assert sum(issubclass(w.category, SadlPluginWarning) for w in caught) == 1
    assert sadl.ops.fake_cube is not None


def test_strict_mode_raises(monkeypatch):
    monkeypatch.setenv("SADL_PLUGINS_STRICT", "1")
    with pytest.raises(PluginError, match="broken"):
        manager.reload_plugins(entry_points=[ep("broken")])


def test_incompatible_plugin(monkeypatch):
    reg, _ = load(ep("incompatible"))
    info = status(reg, "incompatible")
    assert info.status == "incompatible" and "2.0" in info.error
    monkeypatch.setenv("SADL_PLUGINS_STRICT", "1")
    with pytest.raises(IncompatiblePluginError):
        manager.reload_plugins(entry_points=[ep("incompatible")])


def test_blocking_hides_a_plugin(monkeypatch):
    monkeypatch.setenv("SADL_DISABLE_PLUGINS", "good, other")
    reg, _ = load(ep("good"))
    assert status(reg, "good").status == "blocked"
    with pytest.raises(UnknownNameError):
        sadl.ops.fake_cube  # noqa: B018
    assert not hasattr(sadl.nn, "Doubler")


def test_core_cannot_be_blocked(monkeypatch):
    monkeypatch.setenv("SADL_DISABLE_PLUGINS", "sadl")
    reg, _ = load()
    assert status(reg, "sadl").status == "ok" and sadl.ops.tanh


def test_conflict_names_both_plugins_and_the_name_refuses_to_resolve():
    reg, caught = load(ep("good"), ep("conflict"))
    for name in ("good", "conflict"):  # either order of discovery: both stay loaded
        assert status(reg, name).status == "conflict"
        assert "conflict" in status(reg, name).error and "good" in status(reg, name).error
    with pytest.raises(PluginConflictError, match="'conflict'.*'good'"):
        sadl.ops.get("fake_cube")
    assert sadl.nn.Doubler()(sadl.tensor([1.0])).data[0] == 2.0  # good's other names work


def test_conflict_in_strict_mode_is_not_a_load_failure(monkeypatch):
    monkeypatch.setenv("SADL_PLUGINS_STRICT", "1")
    reg, caught = load(ep("good"), ep("conflict"))
    assert [str(w.message).count("fake_cube") for w in caught] == [2]
    assert status(reg, "good").status == status(reg, "conflict").status == "conflict"
    with pytest.raises(PluginConflictError):
        sadl.ops.fake_cube  # noqa: B018


def test_claiming_a_numpy_function_core_owns_sets_aside_only_that_op():
    reg, _ = load(ep("core_clash"))
    info = status(reg, "core_clash")
    assert info.status == "conflict" and "np.tanh" in info.error
    assert info.conflicts == {"register_ops": ["my_tanh"]}
    with pytest.raises(PluginConflictError, match="np.tanh"):
        sadl.ops.my_tanh  # noqa: B018


def test_misspelled_hook_is_reported():
    reg, _ = load(ep("typo"))
    info = status(reg, "typo")
    assert info.status == "error"
    assert "register_opps" in info.error and "register_ops" in info.error


def test_undecorated_hook_is_reported():
    reg, _ = load(ep("undecorated"))
    assert "without @hookimpl" in status(reg, "undecorated").error


def test_wrong_record_type_is_reported():
    reg, _ = load(ep("bad_records"))
    assert "expected LayerDef" in status(reg, "bad_records").error


def test_missing_name_says_which_package_provides_it():
    load()
    with pytest.raises(UnknownNameError, match="sadl-layers"):
        sadl.nn.Linear  # noqa: B018
    with pytest.raises(UnknownNameError, match="sadl-optim"):
        sadl.AdamW  # noqa: B018
    with pytest.raises(UnknownNameError, match="sadl-models"):
        sadl.models.create("gpt")


def test_missing_name_mentions_failed_plugins():
    load(ep("broken"))
    with pytest.raises(UnknownNameError, match="failed to load.*broken"):
        sadl.ops.get("nonexistent_op")


def test_require_api_accepts_older_minor_and_rejects_newer():
    sadl.plugins.require_api("1.0")
    sadl.plugins.require_api("1")
    with pytest.raises(IncompatiblePluginError):
        sadl.plugins.require_api("1.9")
    with pytest.raises(ValueError, match="look like"):
        sadl.plugins.require_api("one")


def test_plugins_listing_is_json_serialisable():
    load(ep("good"), ep("broken"))
    listing = sadl.plugins.plugins()
    text = json.dumps(listing)
    assert '"status": "error"' in text and '"status": "ok"' in text
    core = listing[0]
    assert core["name"] == "sadl" and core["builtin"] and "register_ops" in core["provides"]


def test_discovery_is_lazy():
    manager._registry = None
    assert manager._registry is None
    sadl.ops.get("tanh")
    assert manager._registry is not None


def test_add_hookspecs_lets_a_plugin_define_new_hooks_in_any_order():
    reg, _ = load(ep("extender"), ep("greeter"))
    assert status(reg, "greeter").status == "ok", status(reg, "greeter").error
    assert status(reg, "extender").status == "ok"
    assert reg.pluginmanager.hook.register_greetings() == [["hello"]]


def test_a_plugin_declares_a_record_kind_that_other_plugins_fill():
    # "blue" and "bad_colour" load before "colours", which declares the hook they implement.
    reg, _ = load(ep("bad_colour"), ep("blue"), ep("colours"))
    assert status(reg, "colours").status == "ok" and status(reg, "blue").status == "ok"
    colours = sadl.plugins.records("colours")
    assert {name: c.rgb for name, c in colours.items()} == {
        "red": (255, 0, 0),
        "blue": (0, 0, 255),
    }
    assert reg.provider("colours", "blue").name == "blue"
    assert status(reg, "blue").provides["register_colours"] == ["blue"]
    assert "returned str 'green'; expected ColourDef" in status(reg, "bad_colour").error
    with pytest.raises(UnknownNameError, match="no colour named 'green'"):
        reg.lookup("colours", "green")
    with pytest.raises(UnknownNameError, match="no record kind 'colors'.*records_hookspec"):
        sadl.plugins.records("colors")


def test_a_record_kind_hook_must_be_named_register_something():
    with pytest.raises(ValueError, match="register_<kind>"):
        sadl.plugins.records_hookspec(object, "thing")(lambda: None)


def test_sadl_compile_without_sadl_compile_names_the_package_and_the_command():
    load()  # no plugin at all: sadl-compile is not there
    with pytest.raises(UnknownNameError, match=r"sadl\.compile.*sadl-compile.*install.*packages/"):
        sadl.compile  # noqa: B018
    with pytest.raises(UnknownNameError, match="sadl.CompiledFunction.*sadl-compile"):
        sadl.CompiledFunction  # noqa: B018
    assert not hasattr(sadl, "compile")


def test_sadl_compile_when_its_plugin_is_blocked_says_so(monkeypatch):
    pytest.importorskip("sadl_compile", reason="needs sadl-compile installed (blocked here)")
    monkeypatch.setenv("SADL_DISABLE_PLUGINS", "compile")
    load(*md.entry_points(group="sadl.plugins"))
    with pytest.raises(UnknownNameError, match="blocked by SADL_DISABLE_PLUGINS=compile"):
        sadl.compile  # noqa: B018


def test_models_and_formats_from_a_plugin(tmp_path):
    load(ep("good"))
    model = sadl.models.create("doubler", scale=5)
    assert model.scale == 5 and sadl.models.default_config("doubler") == {"scale": 2}
    assert "doubler" in sadl.models.names()
    path = tmp_path / "t.fakejson"
    sadl.save(sadl.tensor([1.0, 2.0]), path)
    np.testing.assert_allclose(sadl.load(path).numpy(), [1.0, 2.0])
    renamed = tmp_path / "no_suffix"
    renamed.write_bytes(path.read_bytes())
    np.testing.assert_allclose(sadl.load(renamed).numpy(), [1.0, 2.0])  # by magic bytes
    with pytest.raises(LookupError, match="known: .fakejson"):
        sadl.save(sadl.tensor([1.0]), tmp_path / "x.unknown")


def test_save_without_any_format_names_the_package(tmp_path):
    load()
    with pytest.raises(LookupError, match="sadl-serialize"):
        sadl.save(sadl.tensor([1.0]), tmp_path / "x.sadl")
    with pytest.raises(FileNotFoundError):
        sadl.load(tmp_path / "missing.bin")


def test_the_import_check_knows_every_public_module():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("check_imports", root / "tools/check_imports.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    src = Path(sadl.__file__).parent
    names = [p.relative_to(src).with_suffix("").parts for p in src.rglob("*.py")]
    public = {
        ".".join(("sadl", *parts)).removesuffix(".__init__")
        for parts in names
        if not any(part.startswith("_") for part in parts if part != "__init__")
    }
    assert public == tool.PUBLIC_SADL_MODULES


# ------------------------------------------------------------------ SystemExit and output
@pytest.mark.parametrize("name", ["exits", "exits_in_hook"])
def test_a_plugin_raising_system_exit_becomes_its_error_status(name):
    reg, caught = load(ep(name), ep("good"))
    info = status(reg, name)
    assert info.status == "error" and "SystemExit" in info.error
    assert status(reg, "good").status == "ok" and sadl.ops.fake_cube is not None
    assert sum(issubclass(w.category, SadlPluginWarning) for w in caught) == 1


def test_a_plugin_raising_system_exit_in_strict_mode_is_a_plugin_error(monkeypatch):
    monkeypatch.setenv("SADL_PLUGINS_STRICT", "1")
    with pytest.raises(PluginError, match="exits.*SystemExit"):
        manager.reload_plugins(entry_points=[ep("exits")])


def test_what_a_plugin_prints_while_loading_goes_to_stderr(capsys):
    reg, _ = load(ep("noisy"))
    assert status(reg, "noisy").status == "ok"
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "hello from import" in captured.err and "registering ops" in captured.err


def installed_fake_plugins(tmp_path, **entry_points):
    """A directory that, on PYTHONPATH, makes ``entry_points`` installed ``sadl.plugins``."""
    dist = tmp_path / "sadl_fake_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sadl-fake-plugins\nVersion: 0.1\n")
    lines = "".join(f"{name} = fake_plugins.{module}\n" for name, module in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[sadl.plugins]\n{lines}")
    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("SADL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(here), env.get("PYTHONPATH", "")])
    return env


def test_sadl_plugins_json_stays_parseable_when_plugins_print_or_exit(tmp_path):
    env = installed_fake_plugins(
        tmp_path,
        noisy="noisy",
        exits="exits",
        exits_in_hook="exits_in_hook",
        exits_in_command="exits_in_command",
    )
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    listing = {p["name"]: p for p in json.loads(result.stdout)}  # nothing else on stdout
    assert listing["noisy"]["status"] == "ok"
    assert listing["noisy"]["provides"]["register_ops"] == ["noisy_double"]
    assert listing["exits"]["status"] == "error" and "SystemExit" in listing["exits"]["error"]
    assert listing["exits_in_hook"]["status"] == "error"
    assert "noisy: hello from import" in result.stderr
    assert "exits_in_command" in result.stderr and "failed to add its commands" in result.stderr
    # the noisy plugin's command still works, and its output is its own
    result = subprocess.run(
        [sys.executable, "-m", "sadl", "noisy"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0 and result.stdout == "noisy command ran\n", result.stderr


@pytest.mark.parametrize("declared", ["cupy-cuda12x>=13", "cupy-cuda13x>=14", None])
def test_the_import_check_takes_either_cuda_build_of_cupy(tmp_path, declared):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("check_imports", root / "tools/check_imports.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    extra = f'\n[project.optional-dependencies]\ngpu = ["{declared}"]\n' if declared else ""
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "demo"\n{extra}')
    (tmp_path / "src" / "demo").mkdir(parents=True)
    (tmp_path / "src" / "demo" / "kernel.py").write_text("import cupy\nimport cupyx\n")
    problems = tool.check(tmp_path)
    if declared:
        assert problems == []
    else:
        assert len(problems) == 2 and "cupy-cuda12x or cupy-cuda13x" in problems[0]


def test_plugin_authors_get_the_index_checks_gather_makes():
    """``checked_dim`` is what ``gather`` checks its index with, published for gather-like ops
    of plugins (sadl-layers' scatter family), so each refuses a bad index in the same words."""
    import numpy as np
    import pytest
    import sadl
    from sadl.plugins import array_of, checked_dim

    x = np.zeros((3, 4))
    assert checked_dim("mine", x, -1, np.zeros((2, 4), np.int64)) == 1
    assert array_of(sadl.tensor([1.0])).tolist() == [1.0]
    for index, error in [(np.zeros((2, 4)), TypeError), (np.zeros(4, np.int64), ValueError)]:
        with pytest.raises(error) as mine:
            checked_dim("gather", x, 0, index)
        with pytest.raises(error) as gathered:
            sadl.ops.gather(sadl.tensor(x), 0, index)
        assert str(mine.value) == str(gathered.value)
    with pytest.raises(IndexError, match="mine: dim 2 is out of range for 2 dimensions"):
        checked_dim("mine", x, 2, np.zeros((3, 4), np.int64))


def test_subcommands_are_records_the_command_line_reads_from_the_registry():
    """Each subcommand is a ``Command`` record (name, parser, help line) of the plugin that
    added it; ``sadl --help`` lists exactly the served ones."""
    from sadl._host import Command, registry
    from sadl.cli import build_parser

    reg = registry()
    commands = reg.commands()
    assert all(isinstance(c, Command) for c in commands)
    assert {"plugins", "ops", "info"} <= {c.name for c in commands}
    assert reg.records("commands")["ops"].parser.prog == "sadl ops"
    assert reg.provider("commands", "ops").builtin
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == [c.name for c in commands]
