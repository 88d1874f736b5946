"""Fail on any import cycle in a package, and on any import that goes up core's layer list.

Usage: python tools/check_layers.py [packages/core packages/layers ...]   (default: every package)

Every ``import`` counts, at module level or inside a function; only imports under
``if TYPE_CHECKING:`` are skipped (they never run). Importing ``a.b.c`` also runs the package
``a.b``'s ``__init__``, so that counts as an edge too, except from modules inside ``a.b``
(Python imports a package before its members anyway: that is membership, not a dependency).
Core's modules must each belong to one layer of ``CORE_LAYERS`` (bottom first) and may import
only from their own layer or below; the order inside a layer is then fixed by the no-cycle rule.
A higher layer hands a lower one what it needs at import time (``install_*`` functions), never
by importing upward.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Core's layers, bottom to top (docs/architecture.md shows the same table).
CORE_LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundation",
        [
            "_version",
            "_errors",
            "_argparse",
            "_tensor_base",
            "_records",
            "_plugin_records",
            "_hookspecs",
            "_known",
            "_install",
        ],
    ),
    ("arrays and state", ["backends", "cuda", "_grad_mode", "_defaults", "_threads", "random"]),
    ("op tables", ["_ops", "_ops.*"]),
    (
        "tensor and engine",
        [
            "_engine",
            "_inplace",
            "_backward",
            "_methods",
            "_conversions",
            "_torch_methods",
            "_dispatch",
            "_tensor",
        ],
    ),
    (
        "library",
        [
            "_compat",
            "_creation",
            "_module",
            "_optimizer",
            "_sgd",
            "_adam",
            "_checkpoint",
            "_pysadl",
            "_builtin",
            "autograd",
        ],
    ),
    ("plugin host", ["_clashes", "_host"]),
    (
        "namespaces",
        [
            "_namespace",
            "plugins",
            "ops",
            "_torch",
            "nn",
            "nn.*",
            "optim",
            "optim.*",
            "models",
            "io",
            "data",
            "testing",
            "viz",
        ],
    ),
    ("command line and package", ["_commands", "cli", "__main__", ""]),
]


def modules_of(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``src`` (a src-layout package root)."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the same distribution that ``module`` imports (with their parents)."""
    root = module.split(".")[0]
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                names.append(sub if sub in known else base)
        for name in names:
            if name.split(".")[0] != root:
                continue
            targets.add(name)
            parts = name.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if not (module + ".").startswith(parent + "."):
                    targets.add(parent)
    targets.discard(module)
    return {t for t in targets if t in known}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def layer_of(module: str, root: str) -> int | None:
    """The index of core's layer holding ``module`` (None when the table misses it)."""
    relative = module[len(root) + 1 :] if module != root else ""
    for i, (_, patterns) in enumerate(CORE_LAYERS):
        for pattern in patterns:
            if relative == pattern or (
                pattern.endswith(".*") and relative.startswith(pattern[:-1])
            ):
                return i
    return None


def check(package_dir: Path) -> list[str]:
    """Problems in one package: cycles, and for core, modules without a layer or upward imports."""
    src = package_dir / "src"
    problems = []
    for pkg in sorted(p for p in src.iterdir() if (p / "__init__.py").exists()):
        known = {f"{pkg.name}.{k}" if k else pkg.name: v for k, v in modules_of(pkg).items()}
        graph = {m: imports_of(m, path, known) for m, path in known.items()}
        for cycle in find_cycles(graph):
            problems.append(f"{pkg.name}: import cycle among {', '.join(cycle)}")
        if pkg.name != "sadl":
            continue
        for module in sorted(graph):
            own = layer_of(module, "sadl")
            if own is None:
                problems.append(f"sadl: module {module} is in no layer of CORE_LAYERS")
                continue
            for target in sorted(graph[module]):
                theirs = layer_of(target, "sadl")
                if theirs is not None and theirs > own:
                    problems.append(
                        f"sadl: {module} ({CORE_LAYERS[own][0]}) imports {target} "
                        f"({CORE_LAYERS[theirs][0]}), a higher layer; hand it down instead"
                    )
    return problems


def main(argv: list[str]) -> int:
    """Check the given package directories (all of packages/* by default)."""
    dirs = [Path(a) for a in argv] or sorted(p for p in (ROOT / "packages").iterdir() if p.is_dir())
    problems = [p for d in dirs for p in check(d)]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"no import cycles, no upward imports: {', '.join(d.name for d in dirs)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
