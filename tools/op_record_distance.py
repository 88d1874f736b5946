"""Report how far each op record sits from the functions it names; fail past 40 lines.

Usage: python tools/op_record_distance.py packages/core/src/sadl/_ops

An op reads best whole: its forward, its backward rule(s) and its ``OpDef`` record one after the
other (micrograd keeps each operator's forward and its gradient closure together). For every
module in the folder this finds each module-level record, ``NAME = OpDef(...)`` or ``NAME =
_factory(...)`` where ``_factory`` is a module-level function that returns ``OpDef(...)`` (such as
``_unary`` or ``_nondiff``), and collects the module-level functions the record's call names
(forward, backward, names inside tuples and inside lambda bodies; a lambda itself is inline, so it
is at distance 0). A record's distance is the largest number of lines between the record's first
line and the ``def`` line of one of those functions.

Shared helpers are ignored: a function named by more than one record (``_maximum_share``, the
forward of both ``max`` and ``amax``) sits where all its users can find it, usually
at the top of the file, and no single record owns it. The totals line also gives the count with
shared helpers included, for comparison.

Exit status 1 when any record is more than 40 lines from a function it names.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

LIMIT = 40


def _returns_opdef(func: ast.FunctionDef) -> bool:
    """True for a local factory whose body returns ``OpDef(...)``."""
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            callee = node.value.func
            if isinstance(callee, ast.Name) and callee.id == "OpDef":
                return True
    return False


def records(tree: ast.Module) -> list[tuple[str, int, set[str]]]:
    """(record name, line, names of module-level functions its call mentions) per record."""
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    factories = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _returns_opdef(n)}
    found = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        if not (isinstance(call.func, ast.Name) and call.func.id in {"OpDef", *factories}):
            continue
        target = node.targets[0]
        name = target.id if isinstance(target, ast.Name) else ast.unparse(target)
        mentioned = set()
        for part in (*call.args, *(k.value for k in call.keywords)):
            for sub in ast.walk(part):
                if isinstance(sub, ast.Name) and sub.id in functions:
                    mentioned.add(sub.id)
        found.append((name, node.lineno, mentioned))
    return found


def distances(path: Path) -> list[tuple[str, int, int, str | None]]:
    """(record, line, distance ignoring shared helpers, distance counting them) per record."""
    tree = ast.parse(path.read_text(), filename=str(path))
    def_line = {n.name: n.lineno for n in tree.body if isinstance(n, ast.FunctionDef)}
    found = records(tree)
    users: dict[str, int] = {}
    for _, _, mentioned in found:
        for f in mentioned:
            users[f] = users.get(f, 0) + 1
    out = []
    for name, line, mentioned in found:
        own = [abs(line - def_line[f]) for f in mentioned if users[f] == 1]
        every = [abs(line - def_line[f]) for f in mentioned]
        farthest = max(
            (f for f in mentioned if users[f] == 1),
            key=lambda f: abs(line - def_line[f]),
            default=None,
        )
        out.append((name, max(own, default=0), max(every, default=0), farthest))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    folder = Path(argv[0])
    total = over = over_all = 0
    for path in sorted(folder.glob("*.py")):
        rows = distances(path)
        if not rows:
            continue
        far = [(name, d, f) for name, d, _, f in rows if d > LIMIT]
        median = statistics.median(d for _, d, _, _ in rows)
        total += len(rows)
        over += len(far)
        over_all += sum(1 for _, _, d_all, _ in rows if d_all > LIMIT)
        print(f"{path.name}: {len(rows)} records, {len(far)} over {LIMIT} lines, median {median:g}")
        for name, d, f in far:
            print(f"    {name}: {d} lines from {f}")
    print(
        f"total: {over} of {total} records over {LIMIT} lines "
        f"({over_all} counting shared helpers too)"
    )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
