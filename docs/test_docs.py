"""Every documented example runs: ```python blocks in docs/*.md and README.md.

Blocks of one page run in order in one namespace (like a reader following along), in a temporary
working directory. A block whose first line is ``# file: PATH`` shows the repository file PATH
word for word (the rest of the block must equal it), so a tutorial reads whole in the Markdown
source and cannot drift from the file it shows. Blocks fenced as ```py or ```bash are shown, not
run. The scripts of docs/examples/ are run by docs/examples/test_examples.py.
"""

from __future__ import annotations

import functools
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


# -------------------------------------------------------------- the reading tour tells the truth
TOUR = DOCS / "reading-tour.md"
CORE = ROOT / "packages/core/src/sadl"
TOUR_ROW = re.compile(r"^\| (\d+) \| `([\w/]+\.py)` \| (\d+) \| (\d+) \|", re.M)
TOUR_PATH = """
import numpy as np
import sadl

x = sadl.tensor(np.ones((2, 3)))
w = sadl.Parameter(np.ones(3))
(x * w).sum().backward()
assert w.grad.tolist() == [2.0, 2.0, 2.0]
"""


def _code_lines(path: Path) -> int:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sz
    finally:
        sys.path.pop(0)
    return sz.code_lines(path)


def _files_that_run(code: str) -> list[str]:
    """The core files whose Python code runs for ``code`` (after ``import sadl``), in order."""
    tracer = f"""
import os, sys
import numpy as np
import sadl
root = os.path.dirname(sadl.__file__)
seen = []
def profile(frame, event, arg):
    name = frame.f_code.co_filename
    if event == "call" and name.startswith(root) and name not in seen:
        seen.append(name)
sys.setprofile(profile)
exec({code!r})
sys.setprofile(None)
print("\\n".join(os.path.relpath(n, root) for n in seen))
"""
    result = subprocess.run([sys.executable, "-c", tracer], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_the_reading_tour_lists_every_file_on_the_path_with_true_counts():
    text = TOUR.read_text()
    rows = TOUR_ROW.findall(text)
    listed = [name for _, name, _, _ in rows]
    assert [int(step) for step, *_ in rows] == list(range(1, len(rows) + 1))
    assert listed == _files_that_run(TOUR_PATH), "the path table is not the traced path, in order"
    for _, name, lines, code in rows:
        path = CORE / name
        assert int(lines) == len(path.read_text().splitlines()), f"{name}: lines"
        assert int(code) == _code_lines(path), f"{name}: code lines"
    modules = [n for n in listed if not n.startswith("_ops/")]
    assert f"{len(modules)} modules and {len(listed) - len(modules)} op-table files" in text
    flat = " ".join(text.split())
    for name in ("_records.py", "_tensor_base.py"):  # read first, though none of their code runs
        path = CORE / name
        counts = f"`{name}` ({len(path.read_text().splitlines())} lines, {_code_lines(path)} code"
        assert counts + " lines)" in flat, f"{name}: its counts in the prose are stale"


def test_one_backward_pass_runs_code_in_at_most_six_core_files():
    # a newcomer follows (x * w).sum().backward() through at most six files
    path = _files_that_run(TOUR_PATH)
    assert len(path) <= 6, f"the path runs code in {len(path)} core files: {path}"


def test_core_has_at_most_three_install_functions_each_listed_with_its_reason():
    # a hand-down is a cost to the reader; architecture.md says why each one remains
    defined = set()
    for path in sorted(CORE.rglob("*.py")):
        module = ".".join(path.relative_to(CORE).with_suffix("").parts)
        for name in re.findall(r"^def (install_\w+)\(", path.read_text(), re.M):
            defined.add(f"{module}.{name}")
    defined.discard("_install.install_command")  # builds a shell command, hands nothing down
    assert len(defined) <= 3, f"core has {len(defined)} install_* functions: {sorted(defined)}"
    table = (DOCS / "architecture.md").read_text()
    rows = set(re.findall(r"^\| `(\w+\.install_\w+)` \| [^|]+ \| [^|]+ \|$", table, re.M))
    assert rows == defined, "docs/architecture.md's install_* table is not core's install_*"


def test_the_reading_tour_states_the_budgets_lint_checks():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sz
    finally:
        sys.path.pop(0)
    text = " ".join(TOUR.read_text().split())
    assert f"held to {sz.CORE_BUDGET:,} code lines" in text
    assert f"is held to {sz.KERNEL_BUDGET:,}" in text
    kernel = ", ".join(f"`{n}`" for n in sz.KERNEL_FILES)
    assert f"({kernel})" in text
    files = sz.count(CORE)
    share = sum(n for p, n in files.items() if "_ops" in p.parts) / sum(files.values())
    stated = re.search(r"about (\d+)% of them are the op tables", text)
    assert stated, "the tour no longer says what share of core the op tables are"
    assert abs(int(stated.group(1)) - 100 * share) <= 2, f"the op tables are {share:.0%} of core"


def _sz():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sz
    finally:
        sys.path.pop(0)
    if not hasattr(sz.code_lines, "cache_info"):  # each file tokenized once for all these tests
        sz.code_lines = functools.lru_cache(maxsize=None)(sz.code_lines)
    return sz


@pytest.mark.parametrize("budget", ["CORE_BUDGET", "KERNEL_BUDGET", "HOST_BUDGET"])
def test_the_budget_checker_passes_today_and_fails_on_an_overshoot_naming_it(
    budget, monkeypatch, capsys
):
    sz = _sz()
    assert sz.main([]) == 0, capsys.readouterr().err  # within every budget, no ratchet
    name = {"CORE_BUDGET": "core", "KERNEL_BUDGET": "kernel", "HOST_BUDGET": "host"}[budget]
    measured = sz.budgets(sz.count(CORE))[name][0]
    monkeypatch.setattr(sz, budget, measured - 1)  # one code line too many
    assert sz.main([]) == 1
    err = capsys.readouterr().err
    assert f"has {measured} code lines, 1 over its budget of {measured - 1}" in err
    assert err.startswith("core has" if name == "core" else f"the {name} (")


def test_the_budget_checker_names_a_function_over_the_limit(monkeypatch, capsys):
    sz = _sz()
    longest = max(n for p in sz.count(CORE) for _, _, n in sz.long_functions(p, limit=0))
    monkeypatch.setattr(sz, "FUNCTION_BUDGET", longest - 1)
    assert sz.main([]) == 1
    err = capsys.readouterr().err
    assert f"has {longest} code lines, over the {longest - 1} a function of core may have" in err
    assert re.search(r"packages/core/src/sadl/\S+\.py:\d+: \S+ has", err)


def test_the_architecture_page_states_the_three_budgets_and_the_host_files():
    sz = _sz()
    text = " ".join((DOCS / "architecture.md").read_text().split())
    for what, budget in (
        ("the autograd kernel", sz.KERNEL_BUDGET),
        ("the plugin host", sz.HOST_BUDGET),
        ("core as a whole", sz.CORE_BUDGET),
    ):
        assert f"{what} at most {budget:,} code lines" in text, what
    assert f"no function over {sz.FUNCTION_BUDGET} code lines" in text
    host = ", ".join(f"`{n.removesuffix('.py')}`" for n in sz.HOST_FILES)
    assert f"the plugin host at most {sz.HOST_BUDGET:,} code lines ({host})" in text


# ------------------------------------------------------------------ examples in docstrings
DOCTESTED = [
    "sadl.Tensor",
    "sadl.Tensor.backward",
    "sadl.Tensor.detach",
    "sadl.Tensor.to",
    "sadl.Tensor.reshape",
    "sadl.Tensor.numpy",
    "sadl.Tensor.item",
    "sadl.Parameter",
    "sadl.tensor",
    "sadl.zeros",
    "sadl.grad",
    "sadl.no_grad",
    "sadl.ops.get",
    "sadl.plugins.OpDef",
    "sadl.Module",
    "sadl.Module.parameters",
    "sadl.Module.state_dict",
    "sadl.Optimizer",
    "sadl.SGD",
    "sadl.Adam",
    "sadl.testing.gradcheck",
]


def _resolve(dotted: str):
    import importlib

    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", DOCTESTED)
def test_public_names_carry_an_example_that_runs(name):
    import doctest

    obj = _resolve(name)
    target = getattr(obj, "fget", obj)
    tests = doctest.DocTestFinder(recurse=False).find(target, name, globs={})
    examples = [t for t in tests if t.examples]
    assert examples, f"{name} has no >>> example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in examples:
        result = runner.run(test, out=lambda text: None)
        assert result.failed == 0, f"{name}: {result.failed} example(s) failed"


BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def test_one_way_to_install_in_every_shown_command():
    # Every pip in a shown command installs into the README's .venv: `.venv/bin/python -m pip`
    # or the Developing line's `.venv/bin/uv pip ... --python .venv/bin/python` (never a bare
    # `pip` or `python -m pip`, which may be another Python's), and no page says `uv sync`.
    venv = (".venv/bin/python -m pip ", ".venv/bin/uv pip install --python .venv/bin/python ")
    for page in PAGES:
        text = page.read_text()
        for block in BASH.findall(text):
            for line in block.splitlines():
                command = line.split("#", 1)[0]
                if re.search(r"\bpip\b", command):
                    assert any(way in command for way in venv), f"{page.name}: {line}"
                    assert command.count(" pip ") == 1, f"{page.name}: {line}"
        assert "uv sync" not in text, f"{page.name} says `uv sync`; the README's way is pip"


def test_ci_runs_the_readme_lines_verbatim():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    setup = BASH.findall(readme[readme.index("## Set up, then two commands") :])[0].strip()
    commands = [  # (status kept, log kept, the checkpoints' session at a lower priority)
        re.sub(r"^nice -n \d+ ", "", line.split(" ||")[0].split(" >")[0]) for line in ci
    ]
    assert setup in ci and ".venv/bin/nox" in commands  # the set-up line, then every check
    assert ".venv/bin/nox -s pretrained" in commands  # and the README's third command
    assert "```bash\n.venv/bin/nox\n```" in readme
    assert "chromium chromium-driver" in "\n".join(ci)  # for docs/test_site_search.py


def test_the_site_build_fails_on_a_link_to_a_missing_heading():
    # mkdocs 1.6 reports a link to page.md#no-such-anchor at the level validation.anchors
    # names; under strict: true a warning aborts the build (nox's docs session builds --strict).
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    assert config["validation"]["anchors"] == "warn"
