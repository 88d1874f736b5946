"""Run every benchmark script at 1 and 2 threads, each in a fresh process.

``threads`` (bench/threads.py) compares the thread counts itself and runs once.

OPENBLAS_CORETYPE is removed from the environment of these benchmark processes only (it can pin
OpenBLAS to a slower kernel); tests keep whatever the machine sets.
Usage: python bench/run.py [--quick] [--threads 1,2] [area ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
AREAS = [
    "core",
    "dispatch",
    "erf_and_checkpoint",
    "layers",
    "serialize",
    "models",
    "pretrained",
    "compiled",
    "kernels",
    "distributed",
    "threads",
    "mkl",  # (says so and passes where Intel's mkl wheel is not installed)
]
#: Run once, at the first thread count: scripts that set their own thread counts (they compare
#: settings), and the compiled-step ratio, whose budget is stated at one thread.
RUN_ONCE = {"distributed", "compiled"}
#: Extra arguments per area: the compiled step's report splits its products out by BLAS.
EXTRA_ARGS = {"compiled": ["--blas"]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("areas", nargs="*", default=AREAS)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    failed = 0
    for area in args.areas:
        script = HERE / f"{area}.py"
        if not script.exists():
            print(f"(no benchmark script for {area})")
            continue
        if area == "threads":  # it compares the thread counts itself: give it all of them
            env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
            cmd = [sys.executable, str(script), "--threads", args.threads]
            failed += subprocess.call(cmd + (["--quick"] if args.quick else []), env=env) != 0
            continue
        thread_counts = [int(t) for t in args.threads.split(",")]
        for threads in thread_counts[:1] if area in RUN_ONCE else thread_counts:
            env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = str(threads)
            cmd = [
                sys.executable,
                str(script),
                "--threads",
                str(threads),
                *EXTRA_ARGS.get(area, []),
            ]
            if args.quick:
                cmd.append("--quick")
            failed += subprocess.call(cmd, env=env) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
