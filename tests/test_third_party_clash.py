"""A third-party plugin that clashes with a first-party one on one name: that name serves nobody,
and every other name of both plugins keeps working, the names they serve through core's
namespaces (``sadl.data``, ``sadl.checkpoint``, ``sadl.nn.init``, ``sadl.compile``) and their
commands included, in both entry-point orders. The plugin is the fixture sadl-linclash, loaded
here from its source (the ``thirdparty`` session installs its wheel and runs the command line).
"""

import importlib.metadata as md
import warnings
from pathlib import Path

import numpy as np
import pytest
import sadl
from sadl._host import reload_plugins
from sadl.cli import main
from sadl.plugins import PluginConflictError

FIXTURE = Path(__file__).parent / "fixtures/plugins/sadl-linclash/src"
#: entry-point name -> module: before every first-party plugin, and after
ORDERS = {"alinear": "first", "zlinear": "last"}


@pytest.fixture
def load(monkeypatch):
    """Discover the installed plugins plus fixture modules given as ``(name, module)``."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    for name in ("SADL_DISABLE_PLUGINS", "SADL_PREFER"):
        monkeypatch.delenv(name, raising=False)

    def reload(*pairs):
        extra = [
            md.EntryPoint(name=n, value=f"sadl_linclash.{m}", group="sadl.plugins")
            for n, m in pairs
        ]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reg = reload_plugins(entry_points=[*md.entry_points(group="sadl.plugins"), *extra])
        return reg, caught

    yield reload
    monkeypatch.undo()
    sadl.plugins.reload_plugins()


def status(reg, name):
    return next(p for p in reg.plugins if p.name == name).status


@pytest.mark.parametrize("entry_point", ORDERS)
def test_a_clash_on_linear_leaves_every_other_name_of_both_plugins_working(
    entry_point, load, capsys
):
    reg, caught = load((entry_point, ORDERS[entry_point]))
    assert status(reg, "layers") == status(reg, entry_point) == "conflict"
    assert [str(w.message).count("'Linear'") for w in caught] == [1]
    with pytest.raises(PluginConflictError, match="'Linear' is registered by 2 plugins"):
        sadl.nn.Linear  # noqa: B018
    # sadl-layers' other names, and what it serves through core's namespaces
    assert sadl.nn.LayerNorm(4)(sadl.ones((2, 4))).shape == (2, 4)
    assert callable(sadl.checkpoint) and callable(sadl.nn.init.zeros_)
    x, y = sadl.data.windows(np.arange(50), 4, 2, rng=np.random.default_rng(0))
    assert x.shape == y.shape == (2, 4)
    # the third party's own op and command, and the commands of plugins that use sadl-layers
    assert sadl.ops.get(f"{entry_point}_double")(sadl.ones(2)).numpy().tolist() == [2.0, 2.0]
    capsys.readouterr()
    assert main([f"{entry_point}-info"]) == 0
    assert capsys.readouterr().out == f"{entry_point}-info from {entry_point}\n"
    assert main(["train", "gpt", "--help"]) == 0
    assert "--checkpoint-activations" in capsys.readouterr().out


@pytest.mark.parametrize("entry_point", ["acompile", "zcompile"])
def test_a_clash_on_a_compile_pass_leaves_sadl_compile_working(entry_point, load):
    reg, _ = load((entry_point, "dead_code"))
    assert status(reg, "compile") == status(reg, entry_point) == "conflict"
    with pytest.raises(PluginConflictError, match="'dead_code' is registered by 2 plugins"):
        sadl.plugins.served("compile_passes", "dead_code")
    step = sadl.compile(lambda x: (x * x).sum())
    for _ in range(3):
        assert step(sadl.ones(3)).item() == 3.0
