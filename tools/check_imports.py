"""Fail when a package imports a distribution it does not declare, or a private sadl name.

Usage: python tools/check_imports.py packages/layers [packages/optim ...]

Plugins, ours included, import only sadl's public plugin-author API: the modules in
``PUBLIC_SADL_MODULES`` and names without a leading underscore (pytest's ``pytest`` vs
``_pytest``). This is checked in every package but core (source and tests) and in every fixture
plugin under tests/fixtures/plugins, for ``import``/``from`` statements and for attribute chains
such as ``sadl.backends._x``; reaching into a Tensor's private slots (``t._version``) counts too.

Every ``import x`` / ``from x import`` in ``src/`` (at module level or inside functions) must be the
standard library, the package itself, or a declared dependency (extras count: an optional import
such as CuPy's lives in an extra). This is what makes "remove numpy from the declared
dependencies" fail the package's nox session even though numpy arrives through sadl-core.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

# import name -> distribution name, where they differ
DISTRIBUTION_OF = {
    "sadl": "sadl-core",
    "sadl_layers": "sadl-layers",
    "sadl_optim": "sadl-optim",
    "sadl_models": "sadl-models",
    "sadl_serialize": "sadl-serialize",
    "sadl_distributed": "sadl-distributed",
    "sadl_compile": "sadl-compile",
    "sadl_check": "sadl-check",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
}
# import name -> every distribution that provides it (one declared is enough): CuPy is published
# once per CUDA major version, and each build imports as `cupy`.
DISTRIBUTIONS_OF = {
    "cupy": ("cupy-cuda12x", "cupy-cuda13x"),
    "cupyx": ("cupy-cuda12x", "cupy-cuda13x"),
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject: Path) -> tuple[str, set[str]]:
    """(own distribution, every declared runtime distribution including extras)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        deps.extend(extra)
    names = {_normalize(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in deps}
    return _normalize(project["name"]), names


#: The modules of sadl a plugin may import (everything else is internal: its name starts with "_").
PUBLIC_SADL_MODULES = frozenset(
    {
        "sadl",
        "sadl.backends",
        "sadl.cli",
        "sadl.cuda",
        "sadl.data",
        "sadl.io",
        "sadl.models",
        "sadl.nn",
        "sadl.autograd",
        "sadl.nn.functional",
        "sadl.nn.init",
        "sadl.nn.utils",
        "sadl.ops",
        "sadl.optim",
        "sadl.optim.lr_scheduler",
        "sadl.plugins",
        "sadl.random",
        "sadl.testing",
        "sadl.viz",
    }
)
#: Private attributes of sadl objects that plugins have been seen reaching for.
PRIVATE_TENSOR_ATTRIBUTES = frozenset({"_node", "_version", "_inplace", "_assign"})


def private_sadl_uses(root: Path) -> list[str]:
    """``file:line: what`` for every use of a non-public sadl name in ``root``'s Python files."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for what in _private_uses(node):
                found.append(f"{path}:{getattr(node, 'lineno', '?')}: {what}")
    return found


def _private_uses(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [f"imports {a.name}" for a in node.names if _private_module(a.name)]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        module = node.module
        if _private_module(module):
            return [f"imports from {module}"]
        if module.split(".")[0] == "sadl":
            return [f"imports {module}.{a.name}" for a in node.names if _is_private(a.name)]
    if isinstance(node, ast.Attribute):
        chain = _attribute_chain(node)
        if chain and chain[0] == "sadl" and any(_is_private(part) for part in chain[1:]):
            return [f"uses {'.'.join(chain)}"]
        if node.attr in PRIVATE_TENSOR_ATTRIBUTES:
            return [f"uses the private Tensor attribute .{node.attr}"]
    return []


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_module(name: str) -> bool:
    return name.split(".")[0] == "sadl" and name not in PUBLIC_SADL_MODULES


def _attribute_chain(node: ast.Attribute) -> list[str]:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if isinstance(value, ast.Name):
        parts.append(value.id)
        return parts[::-1]
    return []


def imported(src: Path) -> dict[str, list[str]]:
    """Top-level module name -> files importing it."""
    found: dict[str, list[str]] = {}
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], []).append(str(path))
    return found


def check(package_dir: Path) -> list[str]:
    """Problems found in one package (empty when clean)."""
    own, deps = declared(package_dir / "pyproject.toml")
    problems = []
    if own != "sadl-core":
        for part in ("src", "tests"):
            if (package_dir / part).is_dir():
                problems += [
                    f"private sadl name: {u}" for u in private_sadl_uses(package_dir / part)
                ]
    for module, files in sorted(imported(package_dir / "src").items()):
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        dists = DISTRIBUTIONS_OF.get(module, (DISTRIBUTION_OF.get(module, module),))
        names = [_normalize(d) for d in dists]
        if own in names or any(d in deps for d in names):
            continue
        problems.append(
            f"{package_dir.name}: imports {module!r} (distribution {' or '.join(names)}) without "
            f"declaring it in pyproject.toml; first used in {files[0]}"
        )
    return problems


def main(argv: list[str]) -> int:
    """Check each package directory given on the command line.

    With ``--private-only`` (for the fixture plugins, some of which are broken on purpose) only
    the private-name rule is checked.
    """
    if argv and argv[0] == "--private-only":
        problems = [
            f"private sadl name: {u}" for arg in argv[1:] for u in private_sadl_uses(Path(arg))
        ]
        done = f"no private sadl names: {', '.join(Path(a).name for a in argv[1:])}"
    else:
        problems = [p for arg in argv for p in check(Path(arg))]
        done = f"imports declared: {', '.join(Path(a).name for a in argv)}"
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(done)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
