"""Count code lines per package, as tinygrad's ``sz.py`` does, and hold core to a reader's budget.

A code line holds a token that is not a comment, a docstring or whitespace. The budget is drawn
by dependency (DESIGN.md §8): the autograd kernel (records, tensor base, engine, backward,
tensor) at most ``KERNEL_BUDGET`` code lines, the plugin host at most ``HOST_BUDGET``, core as a
whole at most ``CORE_BUDGET``, and no function in core longer than ``FUNCTION_BUDGET``.

Usage: python tools/sz.py [--files]   (exit 1 when a budget is passed, naming what passed it)
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "packages/core/src/sadl"
CORE_BUDGET = 7000
KERNEL_BUDGET = 1000
KERNEL_FILES = ("_tensor_base.py", "_records.py", "_engine.py", "_backward.py", "_tensor.py")
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}

#: The plugin host, everything that discovers plugins, registers, attributes and settles their
#: records, serves their names and reports on them: discovery, pluggy calls, registries, status
#: and missing-name messages (``_host``), the clash rule (``_clashes``), the hooks and record
#: kinds (``_hookspecs``), the records a plugin returns besides ops (``_plugin_records``), core's
#: own plugin (``_builtin``, which implements the hooks as sadl-layers' plugin module does), the
#: plugin-author API over them (``plugins``), the serving of names as module attributes
#: (``_namespace``) and which package provides a missing name (``_known``).
HOST_BUDGET = 700
HOST_FILES = (
    "_host.py",
    "_clashes.py",
    "_hookspecs.py",
    "_plugin_records.py",
    "_builtin.py",
    "plugins.py",
    "_namespace.py",
    "_known.py",
)
#: Next to the host, printed but not counted in it: the command line, a program over the
#: host's public API (``registry().commands()``, ``plugins()``, ``provider_status``) as
#: sadl-check's ``check-plugins`` is, which the host never calls: ``cli`` (the ``sadl``
#: command), ``_commands`` (core's subcommands, a built-in plugin of the command line),
#: ``_argparse`` (its parser class) and ``_install`` (the install command for any distribution,
#: CuPy's extras and threadpoolctl too). ``known.json`` is data, never counted.
HOST_NEIGHBOURS = ("cli.py", "_commands.py", "_argparse.py", "_install.py")
#: The most code lines one function (or method) of core may have.
FUNCTION_BUDGET = 60


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _code_line_numbers(source: str, tree: ast.AST) -> set[int]:
    docstrings = _docstring_lines(tree)
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in SKIPPED or token.type == tokenize.ENDMARKER:
            continue
        lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return lines


def code_lines(path: Path) -> int:
    """The number of code lines of one Python file."""
    source = path.read_text()
    return len(_code_line_numbers(source, ast.parse(source)))


def long_functions(path: Path, limit: int = FUNCTION_BUDGET) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, code lines)`` of each function in ``path`` over ``limit``.

    A function's code lines are those from its ``def`` to its end (nested functions included).
    """
    source = path.read_text()
    tree = ast.parse(source)
    lines = _code_line_numbers(source, tree)
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}."
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                end = child.end_lineno or child.lineno
                n = sum(1 for line in lines if child.lineno <= line <= end)
                if n > limit:
                    found.append((name.removesuffix("."), child.lineno, n))
            visit(child, name)

    visit(tree, "")
    return found


def count(directory: Path) -> dict[Path, int]:
    """Code lines of every Python file under ``directory``."""
    return {p: code_lines(p) for p in sorted(directory.rglob("*.py"))}


def budgets(core: dict[Path, int]) -> dict[str, tuple[int, int, tuple[str, ...] | None]]:
    """``name -> (code lines, budget, files or None for all of core)`` for the three budgets."""

    def part(files: tuple[str, ...]) -> int:
        return sum(n for p, n in core.items() if p.parent == CORE and p.name in files)

    return {
        "kernel": (part(KERNEL_FILES), KERNEL_BUDGET, KERNEL_FILES),
        "host": (part(HOST_FILES), HOST_BUDGET, HOST_FILES),
        "core": (sum(core.values()), CORE_BUDGET, None),
    }


def main(argv: list[str]) -> int:
    """Print every package's count (and, with --files, every core file's); check the budgets."""
    for src in sorted((ROOT / "packages").glob("*/src")):
        files = count(src)
        print(f"{src.parent.name:<12} {sum(files.values()):>7} code lines in {len(files)} files")
    core = count(CORE)
    if "--files" in argv:
        for path, n in sorted(core.items(), key=lambda kv: -kv[1]):
            print(f"  {n:>5}  {path.relative_to(CORE)}")
    measured = budgets(core)
    print("; ".join(f"{name} {n} (budget {limit})" for name, (n, limit, _) in measured.items()))
    near = {p.stem: n for p, n in core.items() if p.parent == CORE and p.name in HOST_NEIGHBOURS}
    listed = ", ".join(f"{name} {n}" for name, n in near.items())
    print(f"next to the host, not counted in it: {sum(near.values())} ({listed})")
    failures = []
    for name, (n, limit, files) in measured.items():
        if n > limit:
            what = "core" if files is None else f"the {name} ({', '.join(files)})"
            failures.append(
                f"{what} has {n} code lines, {n - limit} over its budget of {limit}: make it "
                "shorter, or move what a tensor does not need to a plugin (docs/architecture.md)"
            )
    for path in sorted(core):
        for name, line, n in long_functions(path, FUNCTION_BUDGET):
            failures.append(
                f"{path.relative_to(ROOT)}:{line}: {name} has {n} code lines, over the "
                f"{FUNCTION_BUDGET} a function of core may have: split it"
            )
    for message in failures:
        print(message, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
