"""Shared benchmark helpers: timing, thread control, optional PyTorch, one output format.

Each ``bench/<area>.py`` is runnable on its own (``python bench/core.py --threads 1``) and prints
rows ``workload | sadl | reference | ratio``; ``bench/run.py`` runs them all at 1 and 2 threads.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time
from collections.abc import Callable
from typing import Any


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
    args = parser.parse_args()
    set_threads(args.threads)
    return args


def set_threads(n: int) -> None:
    """Pin BLAS and torch to ``n`` threads (env vars must be set before NumPy loads BLAS)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    torch = optional_torch()
    if torch is not None:
        torch.set_num_threads(n)


def optional_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def best_time(fn: Callable[[], Any], *, number: int, repeat: int = 5, warmup: int = 3) -> float:
    """Best mean seconds per call over ``repeat`` rounds of ``number`` calls."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def row(workload: str, sadl: str, reference: str, ratio: str, note: str = "") -> None:
    print(f"| {workload} | {sadl} | {reference} | {ratio} | {note} |", flush=True)


def header(title: str, threads: int) -> None:
    print(f"\n### {title} ({threads} thread{'s' if threads > 1 else ''})\n", flush=True)
    print("| workload | sadl | reference | ratio (sadl time / reference time) | note |")
    print("|---|---|---|---|---|", flush=True)
