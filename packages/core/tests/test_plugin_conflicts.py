"""One rule for a name two plugins register, whatever the discovery order (docs/plugins.md).

Core's built-in keeps its own; otherwise the plugin ``SADL_PREFER`` names serves it; otherwise
nobody does and the name raises ``PluginConflictError`` naming every provider. Only the contested
records are set aside: every other name of every plugin involved keeps working.
"""

import importlib.metadata as md
import json
import warnings

import numpy as np
import pytest
import sadl
from sadl import _host as manager
from sadl.backends import backend
from sadl.cli import main
from sadl.plugins import PluginConflictError, SadlPluginWarning

pytestmark = pytest.mark.usefixtures("restore_plugins")

#: (entry-point name, module) in both sort orders of the entry-point names.
ORDERS = {
    "a-sorts-first": [("alpha", "clash_a"), ("omega", "clash_b")],
    "b-sorts-first": [("omega", "clash_a"), ("alpha", "clash_b")],
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("SADL_PLUGINS_STRICT", "SADL_DISABLE_PLUGINS", "SADL_PREFER"):
        monkeypatch.delenv(name, raising=False)


def load(*pairs):
    eps = [md.EntryPoint(name=n, value=f"fake_plugins.{m}", group="sadl.plugins") for n, m in pairs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = manager.reload_plugins(entry_points=eps)
        reg.settle_commands()  # as the command line and the listings do (library use never)
    return reg, [w for w in caught if issubclass(w.category, SadlPluginWarning)]


def info(reg, name):
    return next(p for p in reg.plugins if p.name == name)


# Each kind: (use the contested name, use a name of plugin ``tag`` alone -> what it gives).
def use_op(name):
    return sadl.ops.get(name)(sadl.tensor([1.0])).numpy()


def use_format(tmp_path, name, suffix):
    path = tmp_path / f"t{suffix}"
    path.write_bytes(b"x")
    return sadl.load(path), sadl.load(path, format=name)


KINDS = {
    "ops": (lambda tmp: use_op("clash_op"), lambda tmp, tag: use_op(f"{tag}_op")),
    "numpy claim": (lambda tmp: sadl.ops.get("a_sinc"), lambda tmp, tag: use_op(f"{tag}_op")),
    "layers": (lambda tmp: sadl.nn.ClashLayer, lambda tmp, tag: getattr(sadl.nn, f"Own{tag}")),
    "layers (sadl.X)": (lambda tmp: sadl.ClashLayer, lambda tmp, tag: getattr(sadl, f"Own{tag}")),
    "optimizers": (lambda tmp: sadl.optim.ClashOpt, lambda tmp, tag: getattr(sadl, f"Opt{tag}")),
    "optimizers (sadl.X)": (lambda tmp: sadl.ClashOpt, lambda tmp, tag: sadl.optim.Opta),
    "models": (
        lambda tmp: sadl.models.create("clash_model"),
        lambda tmp, tag: sadl.models.create(f"{tag}_model"),
    ),
    "formats by suffix": (
        lambda tmp: use_format(tmp, "a_fmt", ".clash"),
        lambda tmp, tag: use_format(tmp, f"{tag}_fmt", f".{tag}"),
    ),
    "formats by name": (
        lambda tmp: sadl.save(sadl.tensor([1.0]), tmp / "x.a", format="clash_fmt"),
        lambda tmp, tag: use_format(tmp, f"{tag}_fmt", f".{tag}"),
    ),
    "backends": (
        lambda tmp: sadl.zeros(2, device="clashdev"),
        lambda tmp, tag: backend(f"{tag}dev").record.name,
    ),
}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_contested_name_serves_nobody_and_everything_else_works(order, kind, tmp_path):
    reg, _ = load(*ORDERS[order])
    contested, own = KINDS[kind]
    with pytest.raises(PluginConflictError) as raised:
        contested(tmp_path)
    message = str(raised.value)
    assert "alpha" in message and "omega" in message and "SADL_PREFER=" in message
    assert "SADL_DISABLE_PLUGINS=" in message
    for tag in ("a", "b"):
        assert own(tmp_path, tag) is not None
    for name in ("alpha", "omega"):
        assert info(reg, name).status == "conflict"


@pytest.mark.parametrize("order", ORDERS)
def test_a_contested_command_is_refused_and_the_others_run(order, capsys):
    load(*ORDERS[order])
    assert main(["clash-cmd", "--flag"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PluginConflictError" in err
    assert "alpha" in err and "omega" in err and "SADL_PREFER=clash-cmd:" in err
    for tag in ("a", "b"):
        assert main([f"{tag}-cmd", "--flag"]) == 0
        assert capsys.readouterr().out == f"{tag}-cmd from {tag}\n"
    assert main(["plugins"]) == 0  # core's commands are untouched


@pytest.mark.parametrize("order", ORDERS)
def test_the_listing_is_the_same_in_both_orders(order, capsys):
    reg, caught = load(*ORDERS[order])
    assert main(["plugins", "--json"]) == 0
    listing = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    expected = {
        "register_ops": ["clash_op", "{}_sinc"],
        "register_layers": ["ClashLayer"],
        "register_optimizers": ["ClashOpt"],
        "register_models": ["clash_model"],
        "register_formats": ["clash_fmt"],
        "register_backends": ["clashdev"],
        "register_commands": ["clash-cmd"],
    }
    for name, module in ORDERS[order]:
        tag = module[-1]
        entry = listing[name]
        assert entry["status"] == "conflict"
        want = {hook: sorted(n.format(tag) for n in names) for hook, names in expected.items()}
        assert entry["conflicts"] == want
        assert f"{tag}_op" in entry["provides"]["register_ops"]
        assert f"{tag}-cmd" in entry["provides"]["register_commands"]
    # One warning per contested name (and NumPy function, and suffix), none per plugin failure.
    assert len(caught) == 9
    assert main(["plugins"]) == 0
    table = capsys.readouterr().out
    assert "conflict (clash_op" in table and " error " not in table


def test_three_plugins_on_one_name():
    reg, _ = load(("one", "clash_a"), ("two", "clash_b"), ("three", "clash_c"))
    with pytest.raises(PluginConflictError, match="3 plugins: 'one'.*'three'.*'two'") as raised:
        sadl.nn.ClashLayer  # noqa: B018
    assert "none is served" in str(raised.value)
    assert "SADL_DISABLE_PLUGINS=three,two" in str(raised.value)
    assert [info(reg, n).status for n in ("one", "two", "three")] == ["conflict"] * 3
    assert sadl.nn.Owna and sadl.nn.Ownb and sadl.nn.Ownc


@pytest.mark.parametrize("order", ORDERS)
def test_sadl_prefer_chooses_per_name(order, monkeypatch, tmp_path):
    monkeypatch.setenv(
        "SADL_PREFER", "ClashLayer:omega, np.sinc:alpha,.clash:omega,clash_fmt:omega"
    )
    reg, caught = load(*ORDERS[order], ("third", "clash_c"))
    winner = dict(ORDERS[order])["omega"][-1]
    assert sadl.nn.ClashLayer.__name__ == winner
    assert reg.provider("layers", "ClashLayer").name == "omega"
    other = dict(ORDERS[order])["alpha"][-1]
    assert sadl.ops.get(f"{other}_sinc").name == f"{other}_sinc"  # np.sinc is alpha's
    assert use_format(tmp_path, "clash_fmt", ".clash") == (winner, winner)
    with pytest.raises(PluginConflictError):
        sadl.optim.ClashOpt  # noqa: B018  (not chosen: still contested)
    assert len(caught) == 9 - 4


def test_sadl_prefer_entries_that_choose_nothing_are_named_with_the_providers(monkeypatch):
    chosen = "ClashLayer:alpha,clash-cmd:omega,omega,np.sinc:alpha"  # these choose
    wrong = "ClashLayer:omgea,Owna:omega,ClashLyer:alpha,np.sinx:alpha,a-cmd:omega,alpah"
    monkeypatch.setenv("SADL_PREFER", f"{chosen},{wrong}")
    reg, caught = load(("alpha", "clash_a"), ("omega", "clash_b"))
    assert sadl.nn.ClashLayer.__name__ == "a" and sadl.nn.Owna and sadl.optim.ClashOpt
    said = sorted(str(w.message) for w in caught)
    start = "SADL_PREFER entry '{}' chooses nothing: "
    assert said == sorted(
        [
            start.format("ClashLayer:omgea")
            + "'ClashLayer' is provided by alpha, omega, not 'omgea'",
            start.format("alpah") + "the loaded plugins are alpha, omega, not 'alpah'",
            start.format("Owna:omega") + "'Owna' is provided by alpha, not 'omega'",
            start.format("ClashLyer:alpha") + "no plugin registers 'ClashLyer'",
            start.format("np.sinx:alpha") + "no plugin registers 'np.sinx'",
            start.format("a-cmd:omega") + "'a-cmd' is provided by alpha, not 'omega'",
        ]
    )


def test_sadl_prefer_a_plugin_for_all_its_clashes(monkeypatch, capsys):
    monkeypatch.setenv("SADL_PREFER", "two")
    reg, caught = load(("one", "clash_a"), ("two", "clash_b"), ("three", "clash_c"))
    assert not caught
    assert info(reg, "two").status == "ok" and info(reg, "two").conflicts == {}
    assert info(reg, "one").status == info(reg, "three").status == "conflict"
    assert sadl.nn.ClashLayer.__name__ == "b" and sadl.models.create("clash_model") == "b"
    assert main(["clash-cmd"]) == 0 and capsys.readouterr().out == "clash-cmd from b\n"


def test_blocking_one_of_two_restores_the_name(monkeypatch):
    monkeypatch.setenv("SADL_DISABLE_PLUGINS", "alpha")
    reg, caught = load(("alpha", "clash_a"), ("omega", "clash_b"))
    assert not caught and info(reg, "omega").status == "ok"
    assert sadl.nn.ClashLayer.__name__ == "b"


def test_a_clash_with_core_keeps_the_built_in_and_sets_aside_only_the_plugins_record(
    monkeypatch, capsys
):
    monkeypatch.setenv("SADL_PREFER", "core_names")  # a built-in cannot be preferred over
    reg, caught = load(("core_names", "core_names"))
    plugin = info(reg, "core_names")
    assert plugin.status == "conflict"
    assert plugin.conflicts == {
        "register_ops": ["tanh", "my_exp"],
        "register_optimizers": ["SGD"],
        "register_backends": ["cuda"],
        "register_commands": ["info"],
    }
    assert len(caught) == 5 and all("sadl-core's built-in" in str(w.message) for w in caught)
    assert reg.provider("ops", "tanh").name == "sadl" and sadl.SGD is sadl.optim.SGD
    assert reg.provider("optimizers", "SGD").builtin and reg.provider("backends", "cuda").builtin
    x = sadl.tensor([0.5])
    np.testing.assert_allclose(np.exp(x).numpy(), np.exp(0.5), rtol=1e-6)  # core's exp
    with pytest.raises(PluginConflictError, match="np.exp is implemented by sadl-core's"):
        sadl.ops.get("my_exp")
    np.testing.assert_allclose(use_op("core_names_op"), [1.0])
    assert main(["info"]) == 0 and "sadl-core" in capsys.readouterr().out
    assert main(["core-names-cmd"]) == 0 and capsys.readouterr().out == "own\n"


def test_strict_mode_keeps_a_conflict_a_conflict(monkeypatch):
    monkeypatch.setenv("SADL_PLUGINS_STRICT", "1")
    reg, _ = load(("alpha", "clash_a"), ("omega", "clash_b"), ("core_names", "core_names"))
    assert {info(reg, n).status for n in ("alpha", "omega", "core_names")} == {"conflict"}
    with pytest.raises(PluginConflictError):
        sadl.ops.clash_op  # noqa: B018
    assert use_op("a_op") is not None


def test_library_use_never_runs_register_commands():
    reg = manager.reload_plugins(entry_points=[])
    assert not reg._commands_settled
    sadl.ops.get("tanh")
    assert not reg._commands_settled and reg.provider("commands", "plugins").builtin


@pytest.mark.parametrize("order", ORDERS)
def test_a_contested_numpy_function_raises_the_conflict_not_a_missing_op(order):
    load(*ORDERS[order])
    for x in (sadl.tensor([0.5]), sadl.tensor([0.5], requires_grad=True)):
        with pytest.raises(PluginConflictError, match="np.sinc is implemented by 2 plugins"):
            np.sinc(x)
    assert np.sin(sadl.tensor([0.5])).shape == (1,)  # every other NumPy function still works


def test_sadl_prefer_of_a_built_in_name_warns_that_it_chooses_nothing(monkeypatch):
    monkeypatch.setenv("SADL_PREFER", "tanh:core_names,info:core_names,SGD:alpha")
    reg, caught = load(("core_names", "core_names"), ("alpha", "clash_a"))
    said = [str(w.message) for w in caught if "SADL_PREFER" in str(w.message)]
    assert sorted(said) == [
        f"SADL_PREFER entry '{key}:{plugin}' chooses nothing: '{key}' is sadl-core's built-in, "
        "which no plugin can replace"
        for key, plugin in (("SGD", "alpha"), ("info", "core_names"), ("tanh", "core_names"))
    ]
    assert reg.provider("ops", "tanh").builtin and reg.provider("commands", "info").builtin
