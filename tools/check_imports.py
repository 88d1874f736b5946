"""Fail when a package's source imports a distribution its pyproject.toml does not declare.

Usage: python tools/check_imports.py packages/layers [packages/optim ...]

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
    "cupy": "cupy-cuda12x",
    "cupyx": "cupy-cuda12x",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
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
    for module, files in sorted(imported(package_dir / "src").items()):
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        dist = _normalize(DISTRIBUTION_OF.get(module, module))
        if dist == own or dist in deps:
            continue
        problems.append(
            f"{package_dir.name}: imports {module!r} (distribution {dist}) without declaring it "
            f"in pyproject.toml; first used in {files[0]}"
        )
    return problems


def main(argv: list[str]) -> int:
    """Check each package directory given on the command line."""
    problems = [p for arg in argv for p in check(Path(arg))]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"imports declared: {', '.join(Path(a).name for a in argv)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
