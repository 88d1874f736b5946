"""``sadl passes`` (also ``sadl plugins --passes``): the registered compile passes in the order
they run, each with the plugin that registered it and what it declared to run after and before.
"""

from __future__ import annotations

import argparse
import json

from sadl.plugins import plugins, records

from sadl_compile.pipeline import pass_order

__all__ = ["pass_rows", "run"]


def pass_rows() -> list[dict[str, object]]:
    """Every registered pass in its resolved order: ``name``, ``plugin``, ``after``,
    ``before``, ``fusion`` and ``doc`` (``PassOrderError`` when the order cannot be resolved).
    """
    owner = {
        name: str(p["name"])
        for p in plugins()
        for name in p["provides"].get("register_compile_passes", ())  # type: ignore[attr-defined]
    }
    return [
        {
            "name": p.name,
            "plugin": owner.get(p.name, "?"),
            "after": list(p.after),
            "before": list(p.before),
            "fusion": p.fusion,
            "doc": p.doc,
        }
        for p in pass_order(records("compile_passes"))
    ]


def run(args: argparse.Namespace) -> int:
    """Print the passes as a table (``--json``: as a list of objects)."""
    rows = pass_rows()
    if getattr(args, "json", False):
        print(json.dumps(rows, indent=2))
        return 0
    table = [("#", "PASS", "PLUGIN", "FUSION", "AFTER", "BEFORE")]
    for i, r in enumerate(rows, 1):
        after = ", ".join(r["after"]) or "-"  # type: ignore[arg-type]
        before = ", ".join(r["before"]) or "-"  # type: ignore[arg-type]
        fusion = "yes" if r["fusion"] else "-"
        table.append((str(i), str(r["name"]), str(r["plugin"]), fusion, after, before))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print(f"\n{len(rows)} passes; sadl.compile(fusion=False) skips those marked fusion")
    return 0
