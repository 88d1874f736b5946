"""What a new user meets first: install hints that work, a graph to look at, BLAS threads."""

import importlib.metadata as md
import os
import shutil
import sys
import warnings

import numpy as np
import pytest
import sadl
from sadl import _install
from sadl.plugins import UnknownNameError

pytestmark = pytest.mark.usefixtures("restore_plugins")


def only_core(monkeypatch, *eps, blocked=""):
    monkeypatch.delenv("SADL_PLUGINS_STRICT", raising=False)
    monkeypatch.setenv("SADL_DISABLE_PLUGINS", blocked)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return sadl._host.reload_plugins(entry_points=list(eps))


def ep(name, module=None):
    return md.EntryPoint(name=name, value=f"fake_plugins.{module or name}", group="sadl.plugins")


# ---------------------------------------------------------------- missing names
def test_from_sadl_import_of_a_missing_plugin_name_says_which_package_to_install(monkeypatch):
    only_core(monkeypatch)
    message = "'sadl.compile' is provided by sadl-compile, which is not installed: .*install"
    with pytest.raises(ImportError, match=message) as info:
        from sadl import compile  # noqa: F401
    assert info.value.name == "sadl_compile"
    with pytest.raises(ImportError, match="'sadl.checkpoint' is provided by sadl-layers"):
        from sadl import checkpoint  # noqa: F401
    with pytest.raises(UnknownNameError, match=message):  # attribute access: an AttributeError
        sadl.compile  # noqa: B018
    assert not hasattr(sadl, "compile")
    with pytest.raises(ImportError, match="cannot import name 'no_such_name' from 'sadl'"):
        from sadl import no_such_name  # noqa: F401


def test_import_sadl_dot_a_missing_plugin_name_says_which_package_to_install(monkeypatch):
    only_core(monkeypatch)
    with pytest.raises(ImportError, match="'sadl.compile' is provided by sadl-compile"):
        import sadl.compile
    with pytest.raises(ModuleNotFoundError, match="No module named 'sadl.no_such_module'"):
        import sadl.no_such_module  # noqa: F401


def test_the_sadl_namespace_holds_its_public_names_and_underscored_ones_only():
    # (a submodule imported later, such as sadl.cli, becomes an attribute too)
    extra = {
        name
        for name, value in vars(sadl).items()
        if not name.startswith("_")
        and name not in sadl.__all__
        and getattr(value, "__name__", None) != f"sadl.{name}"
    }
    assert not extra, sorted(extra)


def test_install_command_names_the_checkout_path_never_an_unpublished_pypi_name():
    command = _install.install_command("sadl-optim")
    root = _install.checkout_root()
    assert root is not None  # these tests run from a checkout
    assert command.endswith(os.path.relpath(root / "packages/optim")) or command.endswith(
        str(root / "packages/optim")
    )
    assert " sadl-optim" not in command
    assert "install" in command
    gpu = _install.install_command("sadl-core", extra="gpu")
    assert gpu.endswith("core[gpu]'")


def test_install_command_without_a_checkout_says_where_to_run_it(monkeypatch):
    monkeypatch.setattr(_install, "checkout_root", lambda: None)
    command = _install.install_command("sadl-models")
    assert command.endswith(" packages/models (run it in a clone of the sadl repository)")


def test_the_installer_is_the_running_python(monkeypatch):
    monkeypatch.setattr(_install.importlib.util, "find_spec", lambda name: object())
    assert " -m pip install" in _install.install_command("threadpoolctl")
    monkeypatch.setattr(_install.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/uv" if name == "uv" else None)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    assert _install.install_command("threadpoolctl") == (
        f"uv pip install --python {sys.executable} threadpoolctl"
    )
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    assert _install.install_command("threadpoolctl") == "uv pip install threadpoolctl"


def test_every_missing_name_path_names_the_package_and_a_command(monkeypatch):
    only_core(monkeypatch)
    cases = [
        (lambda: sadl.optim.AdamW, "'AdamW' is provided by sadl-optim, which is not installed: "),
        (lambda: sadl.optim.adamw, "'AdamW' is provided by sadl-optim, which is not installed: "),
        (lambda: sadl.nn.Linear, "'Linear' is provided by sadl-layers"),
        (lambda: sadl.Linear, "'Linear' is provided by sadl-layers"),
        (lambda: sadl.models.GPT, "'GPT' is provided by sadl-models"),
        (lambda: sadl.models.create("gpt"), "'gpt' is provided by sadl-models"),
        (lambda: sadl.ops.cross_entropy, "'cross_entropy' is provided by sadl-layers"),
        (
            lambda: sadl.nn.init.kaiming_uniform_,
            "'sadl.nn.init.kaiming_uniform_' is provided by sadl-layers, which is not installed: ",
        ),
    ]
    for get, message in cases:
        with pytest.raises(UnknownNameError) as info:
            get()
        assert message in str(info.value)
        assert "install" in str(info.value) and "did you mean" not in str(info.value)


def test_a_wrong_case_of_an_installed_name_is_pointed_out(monkeypatch):
    only_core(monkeypatch)
    with pytest.raises(UnknownNameError, match=r"did you mean 'Adam'\? \(names are case"):
        _ = sadl.optim.adam


def test_the_plugin_warning_is_one_line_and_points_at_the_callers_code(monkeypatch):
    monkeypatch.delenv("SADL_PLUGINS_STRICT", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sadl._host.reload_plugins(entry_points=[ep("broken")])
    (warning,) = caught
    text = str(warning.message)
    assert "\n" not in text and "failed to load (error)" in text and "sadl plugins" in text
    assert " (at " not in text  # the traceback location stays in `sadl plugins`
    assert warning.filename == __file__


# ---------------------------------------------------------------- sadl.viz
def small_graph():
    w = sadl.Parameter(np.ones((3, 2), np.float32))
    x = sadl.tensor(np.ones((4, 3), np.float32))
    h = np.tanh(x @ w)
    return (h**2).mean(), w


def test_to_dot_shows_ops_shapes_dtypes_leaves_and_versions():
    loss, w = small_graph()
    dot = sadl.viz.to_dot(loss, names={"w": w})
    assert dot.startswith("digraph sadl {") and dot.rstrip().endswith("}")
    for text in ("matmul\\n(4, 2) float32", "tanh", "mean", "w: Parameter\\n(3, 2) float32"):
        assert text in dot
    assert "requires grad" in dot and "constant\\n(4, 3) float32" in dot
    assert 'label="v0"' in dot


def test_to_dot_marks_an_input_changed_in_place_and_a_freed_graph():
    w = sadl.Parameter(np.ones(3, np.float32))
    x = sadl.tensor(np.ones(3, np.float32), requires_grad=True)
    y = x * 1.0
    z = (y * w).sum()
    y += 1  # backward through z would now fail: the graph shows where
    dot = sadl.viz.to_dot(z)
    assert "saved v0, now v1\\nchanged in place" in dot and 'color="#cc0000"' in dot
    loss, _ = small_graph()
    loss.backward()
    assert "freed by backward()" in sadl.viz.to_dot(loss)


def test_render_needs_graphviz_and_says_how_to_get_it(tmp_path, monkeypatch):
    loss, _ = small_graph()
    with pytest.raises(ValueError, match="use .svg, .png or .pdf"):
        sadl.viz.render(loss, tmp_path / "graph.txt")
    if shutil.which("dot"):
        path = sadl.viz.render(loss, tmp_path / "graph.svg")
        assert path.read_text().lstrip().startswith(("<?xml", "<svg"))
        assert "tanh" in path.read_text()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install graphviz.*to_dot"):
        sadl.viz.render(loss, tmp_path / "other.svg")
    assert not (tmp_path / "other.svg").exists()


# ---------------------------------------------------------------- threads
def test_set_num_threads_changes_the_blas_pool():
    before = sadl.get_num_threads()
    try:
        sadl.set_num_threads(1)
        assert sadl.get_num_threads() == 1
    finally:
        sadl.set_num_threads(before)
    with pytest.raises(ValueError, match="at least 1"):
        sadl.set_num_threads(0)
    with pytest.raises(TypeError, match="integer"):
        sadl.set_num_threads(1.5)


def test_set_num_threads_without_threadpoolctl_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    with pytest.raises(ModuleNotFoundError, match=r"needs threadpoolctl.*install.* threadpoolctl"):
        sadl.set_num_threads(1)
