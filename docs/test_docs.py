"""Every documented example runs: ```python blocks in docs/*.md and README.md.

Blocks of one page run in order in one namespace (like a reader following along), in a temporary
working directory. ``--8<-- "path"`` lines (mkdocs snippets) are replaced by the file they include.
Blocks fenced as ```py or ```bash are shown, not run. The scripts of docs/examples/ are run by
docs/examples/test_examples.py.
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
SNIPPET = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$', re.M)


def python_blocks(page: Path) -> list[str]:
    text = page.read_text()
    blocks = []
    for block in FENCE.findall(text):
        blocks.append(SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(), block))
    return blocks


@pytest.mark.parametrize(
    "page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_page_examples_run(page, tmp_path, monkeypatch):
    blocks = python_blocks(page)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(blocks):
        code = compile(block, f"{page.name} block {i + 1}", "exec")
        exec(code, namespace)


def test_every_hook_is_documented_and_tested():
    from sadl.plugins import hookspecs

    hooks = [
        name for name in dir(hookspecs) if getattr(getattr(hookspecs, name), "sadl_spec", None)
    ]
    assert len(hooks) == 7, hooks
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
