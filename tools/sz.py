"""Count code lines per package, as tinygrad's ``sz.py`` does, and hold core to its budget.

A code line holds a token that is not a comment, a docstring or whitespace. The budget is the
mission's "minimal core" made a number (DESIGN.md §8): core at most ``CORE_BUDGET`` code lines,
its autograd kernel (tensor base, records, engine, backward, tensor) at most ``KERNEL_BUDGET``.

Usage: python tools/sz.py [--files]   (exit 1 when a budget is passed)
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


def code_lines(path: Path) -> int:
    """The number of code lines of one Python file."""
    source = path.read_text()
    docstrings = _docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in SKIPPED or token.type == tokenize.ENDMARKER:
            continue
        lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(lines)


def count(directory: Path) -> dict[Path, int]:
    """Code lines of every Python file under ``directory``."""
    return {p: code_lines(p) for p in sorted(directory.rglob("*.py"))}


def main(argv: list[str]) -> int:
    """Print every package's count (and, with --files, every core file's); check the budgets."""
    for src in sorted((ROOT / "packages").glob("*/src")):
        files = count(src)
        print(f"{src.parent.name:<12} {sum(files.values()):>7} code lines in {len(files)} files")
    core = count(CORE)
    if "--files" in argv:
        for path, n in sorted(core.items(), key=lambda kv: -kv[1]):
            print(f"  {n:>5}  {path.relative_to(CORE)}")
    kernel = sum(n for p, n in core.items() if p.parent == CORE and p.name in KERNEL_FILES)
    total = sum(core.values())
    print(f"core total {total} (budget {CORE_BUDGET}); kernel {kernel} (budget {KERNEL_BUDGET})")
    failures = []
    if total > CORE_BUDGET:
        failures.append(
            f"core has {total} code lines, {total - CORE_BUDGET} over its budget of {CORE_BUDGET}:"
            " move a feature into a plugin package (docs/architecture.md) or make it shorter"
        )
    if kernel > KERNEL_BUDGET:
        failures.append(
            f"the autograd kernel ({', '.join(KERNEL_FILES)}) has {kernel} code lines,"
            f" {kernel - KERNEL_BUDGET} over its budget of {KERNEL_BUDGET}"
        )
    for message in failures:
        print(message, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
