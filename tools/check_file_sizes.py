"""Fail when a source file of any package is longer than 600 lines (small files, one job each).

Usage: python tools/check_file_sizes.py [packages/core ...]   (default: every package's src/)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600


def main(argv: list[str]) -> int:
    """Print every source file over the limit; exit 1 if there is one."""
    dirs = [Path(a) for a in argv] or sorted((ROOT / "packages").glob("*/src"))
    too_long = []
    for directory in dirs:
        for path in sorted(directory.rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > LIMIT:
                too_long.append(f"{path}: {lines} lines (limit {LIMIT}); split it by job")
    for message in too_long:
        print(message, file=sys.stderr)
    if not too_long:
        print(f"no source file over {LIMIT} lines")
    return 1 if too_long else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
