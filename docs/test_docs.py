"""Every documented example runs: ```python blocks in docs/*.md and README.md.

Blocks of one page run in order in one namespace (like a reader following along), in a temporary
working directory. A block whose first line is ``# file: PATH`` shows the repository file PATH
word for word (the rest of the block must equal it), so a tutorial reads whole in the Markdown
source and cannot drift from the file it shows. Blocks fenced as ```py or ```bash are shown, not
run. The scripts of docs/examples/ are run by docs/examples/test_examples.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
ANY_FENCE = re.compile(r"^```\w*\n(.*?)^```", re.S | re.M)
SHOWN_FILE = re.compile(r"\A# file: (\S+)\n")


def python_blocks(page: Path) -> list[str]:
    return FENCE.findall(page.read_text())


def shown_files() -> list[tuple[Path, str, str]]:
    """(page, path, block) for every block that shows a repository file."""
    found = []
    for page in PAGES:
        for block in ANY_FENCE.findall(page.read_text()):
            match = SHOWN_FILE.match(block)
            if match:
                found.append((page, match.group(1), block[match.end() :]))
    return found


@pytest.mark.parametrize("page, path, block", shown_files(), ids=lambda v: str(v)[-40:])
def test_a_shown_file_is_the_file(page, path, block):
    assert (ROOT / path).read_text() == block, f"{page.name} shows {path}, which has changed"


def test_the_plugin_tutorial_shows_its_files():
    shown = {path for page, path, _ in shown_files() if page.name == "plugins.md"}
    assert shown == {
        "tests/fixtures/plugins/sadl-sample/pyproject.toml",
        "tests/fixtures/plugins/sadl-sample/src/sadl_sample/plugin.py",
    }


@pytest.mark.parametrize(
    "page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_page_examples_run(page, tmp_path, monkeypatch):
    blocks = python_blocks(page)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(blocks):
        shown = SHOWN_FILE.match(block)
        if shown:  # a repository file shown whole runs as itself (its __file__ is its path)
            namespace["__file__"] = str(ROOT / shown.group(1))
        code = compile(block, f"{page.name} block {i + 1}", "exec")
        exec(code, namespace)


def test_every_hook_is_documented_and_tested():
    from sadl.plugins import hookspecs
    from sadl_compile import hookspecs as compile_hookspecs

    hooks = [
        name
        for module in (hookspecs, compile_hookspecs)
        for name in dir(module)
        if getattr(getattr(module, name), "sadl_spec", None)
    ]
    assert len(hooks) == 9, hooks  # core's 8 and sadl-compile's register_compile_passes
    generator = ROOT / "tools" / "gen_hooks_doc.py"
    result = subprocess.run([sys.executable, str(generator), "--check"], capture_output=True)
    assert result.returncode == 0, result.stderr.decode()
    reference = (DOCS / "hooks.md").read_text()
    tests = "\n".join(p.read_text() for p in ROOT.glob("**/tests/**/*.py") if ".nox" not in p.parts)
    for hook in hooks:
        assert f"## `{hook}" in reference, f"hook {hook} has no section in docs/hooks.md"
        assert hook in tests, f"hook {hook} is not exercised by any test"


def test_links_into_the_source_land_on_what_they_name():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "doc_links.py")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_core_op_is_in_the_op_reference():
    from sadl._builtin import CORE_OPS

    reference = (DOCS / "ops.md").read_text()
    missing = [op.name for op in CORE_OPS if f"`{op.name}`" not in reference]
    assert not missing, f"docs/ops.md does not list: {missing}"


def test_the_graph_picture_is_what_sadl_viz_draws():
    result = subprocess.run(
        [sys.executable, str(DOCS / "img" / "make_graph.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (DOCS / "img" / "mlp-graph.svg").read_text().lstrip().startswith("<?xml")


def test_every_sadl_layers_op_and_layer_is_in_the_layer_reference():
    from sadl_layers.modules import LAYERS
    from sadl_layers.ops import OPS

    reference = (DOCS / "layers.md").read_text()
    names = [op.name for op in OPS] + list(LAYERS)
    missing = [name for name in names if f"`{name}`" not in reference]
    assert not missing, f"docs/layers.md does not list: {missing}"


BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def test_one_way_to_install_in_every_shown_command():
    # Every pip in a shown command is the README's `.venv/bin/python -m pip` (never a bare
    # `pip` or `python -m pip`, which may be another Python's), and no page says `uv sync`.
    for page in PAGES:
        text = page.read_text()
        for block in BASH.findall(text):
            for line in block.splitlines():
                command = line.split("#", 1)[0]
                if re.search(r"\bpip\b", command):
                    assert ".venv/bin/python -m pip " in command, f"{page.name}: {line}"
                    assert command.count(" pip ") == 1, f"{page.name}: {line}"
        assert "uv sync" not in text, f"{page.name} says `uv sync`; the README's way is pip"


def test_ci_runs_the_readme_lines_verbatim():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    setup = BASH.findall(readme[readme.index("## Set up, then two commands") :])[0].strip()
    assert setup in ci and ".venv/bin/nox" in ci  # the set-up line, then every check
    assert "```bash\n.venv/bin/nox\n```" in readme
    assert "chromium chromium-driver" in "\n".join(ci)  # for docs/test_site_search.py
