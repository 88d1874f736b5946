"""Eager speed of two source trees of sadl, in alternating rounds: did a change slow anything?

Each tree is a checkout of this repository (``git worktree add /tmp/before <commit>`` makes
one). Every round runs each workload once per tree, each in a fresh process whose
``PYTHONPATH`` puts that tree's ``packages/*/src`` first, so the installed distributions'
entry points load the tree's code. Rounds alternate the trees, so both see the same load; the
best time per tree counts. Workloads, eager (bench/core.py, bench/models.py): W1 per-op
overhead, W2 the MLP step, W3-S and W3-M the GPT training step; ``--only W3-S-compiled
W3-M-compiled`` times that step under ``sadl.compile`` (with each tree's sadl-kernels).

Usage: python bench/trees.py BEFORE AFTER [--rounds 3] [--threads 1] [--quick]
The exit status is 1 when AFTER is more than 3% slower than BEFORE on a workload.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
WORKLOADS = ("W1", "W2", "W3-S", "W3-M")  # the default; also W3-S-compiled, W3-M-compiled
BUDGET = 1.03


def _worker(workload: str, tree: str, quick: bool) -> float:
    """Seconds per op (W1) or per step, best of the rounds, with sadl from ``tree``."""
    import sadl
    from _common import best_time

    assert sadl.__file__.startswith(tree), f"sadl comes from {sadl.__file__}, not from {tree}"
    if workload == "W1":
        from core import w1_sadl

        return best_time(w1_sadl, number=20 if quick else 100, repeat=5) / 400
    if workload == "W2":
        from core import make_w2_sadl

        return best_time(make_w2_sadl(), number=5 if quick else 20, repeat=5)
    from models import CONFIGS, _batches, _repeats, _sadl_train_step

    cfg, compiled = workload[3], workload.endswith("-compiled")
    step, _ = _sadl_train_step(CONFIGS[cfg], _batches(CONFIGS[cfg], 4), compiled=compiled)
    number, repeat = _repeats(cfg, quick)
    return best_time(step, number=number, repeat=repeat, warmup=2)


def _run(tree: Path, workload: str, threads: int, quick: bool) -> float:
    """``workload``'s time in a fresh process whose ``PYTHONPATH`` puts ``tree``'s sources first."""
    from _common import run_worker

    sources = [str(p) for p in sorted((tree / "packages").glob("*/src"))]
    path = os.pathsep.join([*sources, os.environ.get("PYTHONPATH", "")])
    worker = [workload, str(tree.resolve())]
    result = run_worker(__file__, worker, threads, quick, None, {"PYTHONPATH": path})
    if isinstance(result, str):
        raise SystemExit(f"{workload} in {tree}: {result}")
    return float(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before", type=Path, nargs="?")
    parser.add_argument("after", type=Path, nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "TREE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(*args.worker, args.quick)))
        return 0
    if args.before is None or args.after is None:
        parser.error("give the two trees to compare: BEFORE AFTER")
    os.environ.pop("OPENBLAS_CORETYPE", None)  # benchmarks only: it can pin a slower kernel
    best: dict[tuple[str, str], float] = {}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for workload in args.only:
            for side in order:
                seconds = _run(getattr(args, side), workload, args.threads, args.quick)
                key = (side, workload)
                best[key] = min(best.get(key, float("inf")), seconds)
    print(f"\n### {args.before} (before) vs {args.after} (after), {args.threads} thread(s)\n")
    print("| workload | before | after | after / before | note |\n|---|---|---|---|---|")
    from _common import judged, verdict

    failed = 0
    for workload in args.only:
        unit, scale = ("µs/op", 1e6) if workload == "W1" else ("ms/step", 1e3)
        b, a = best[("before", workload)], best[("after", workload)]
        ok = a / b <= BUDGET
        failed += not ok and not judged()
        note = verdict(ok, f"budget <= {BUDGET}")
        cells = [workload, f"{b * scale:.2f} {unit}", f"{a * scale:.2f} {unit}", f"{a / b:.3f}"]
        print("| " + " | ".join([*cells, note]) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
