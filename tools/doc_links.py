"""Check (or fix) the docs' links into the source: ``[`name`](../packages/.../file.py#L120)``.

Usage: python tools/doc_links.py [--fix] [docs/page.md ...]   (default: every page under docs/)

A link into a Python file with a ``#L<n>`` anchor must land on the definition its label names:
the label ``apply`` (or ``Tensor.backward``, ``MULTIPLY``) must be defined on line n (``def``,
``class`` or an assignment at that line). Every other relative link must point at a file that
exists. With ``--fix`` the line numbers are rewritten from the labels, so moving code never
leaves a stale link: run it after editing core, and the docs test fails until you do.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def definition_line(source: Path, label: str) -> int | None:
    """The 1-based line defining ``label`` (``name`` or ``Class.name``) in ``source``."""
    parts = label.strip("`").removesuffix("()").split(".")
    name, owner = parts[-1], parts[-2] if len(parts) > 1 else None
    pattern = re.compile(
        rf"^(\s*)(?:(?:async\s+)?def|class)\s+{re.escape(name)}\b|^(\s*){re.escape(name)}\s*[:=]"
    )
    lines = source.read_text().splitlines()
    inside = owner is None
    for number, line in enumerate(lines, start=1):
        if owner is not None and re.match(rf"^class\s+{re.escape(owner)}\b", line):
            inside = True
            continue
        if inside and pattern.match(line):
            return number
    return None


def check_page(page: Path, fix: bool) -> list[str]:
    """Problems with the links of one page (fixing line numbers in place when asked)."""
    text = page.read_text()
    problems: list[str] = []

    def visit(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match.group(0)  # external or same-page links
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve()
        notebook_page = path.suffix == ".md" and path.with_suffix(".ipynb").is_file()
        if not path.exists() and not notebook_page:  # (tools/mkdocs_notebooks.py makes those)
            problems.append(f"{page.relative_to(ROOT)}: link to missing file {path_part}")
            return match.group(0)
        if path.suffix != ".py" or not anchor.startswith("L"):
            return match.group(0)
        found = definition_line(path, label)
        if found is None:
            problems.append(f"{page.relative_to(ROOT)}: {label} is not defined in {path_part}")
            return match.group(0)
        if anchor != f"L{found}":
            if fix:
                return f"[{label}]({path_part}#L{found})"
            problems.append(
                f"{page.relative_to(ROOT)}: {label} is at line {found} of {path_part}, the link "
                f"says {anchor}; run python tools/doc_links.py --fix"
            )
        return match.group(0)

    new_text = LINK.sub(visit, text)
    if fix and new_text != text:
        page.write_text(new_text)
    return problems


def main(argv: list[str]) -> int:
    """Check every page (or the given ones); ``--fix`` rewrites stale line numbers."""
    fix = "--fix" in argv
    pages = [Path(a).resolve() for a in argv if a != "--fix"] or sorted(DOCS.rglob("*.md"))
    problems = [p for page in pages for p in check_page(page, fix)]
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
