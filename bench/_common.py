"""Shared benchmark helpers: timing, thread control, optional PyTorch, one output format.

Each ``bench/<area>.py`` is runnable on its own (``python bench/core.py --threads 1``) and prints
rows ``workload | sadl | reference | ratio``; ``bench/run.py`` runs them all at 1 and 2 threads.

Every report starts with :func:`where_ran`'s header (the CPU model, the BLAS NumPy loaded and
its kernel, the thread settings, the load average) and ends with the load average again; a
budget is judged only while the load average stays below ``QUIET_LOAD`` (:func:`judged`):
on a busier machine the report says "not judged: load X" instead of ok or OVER.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

#: The one-minute load average under which a budget is judged (at the report's start and end).
QUIET_LOAD = 1.5
#: The thread settings a report names: the BLAS and OpenMP variables, sadl's BLAS choice.
THREAD_VARS = (
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
    "OPENBLAS_CORETYPE", "SADL_BLAS",
)  # fmt: skip
_START_LOAD: list[float] = []


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; elsewhere what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


def blas_line() -> str:
    """NumPy's BLAS as threadpoolctl sees it in a fresh process with this environment: the
    library, its version, the kernel it picked and its threads (importing NumPy here would
    load the BLAS before a script sets its thread variables)."""
    code = (
        "import json, numpy, threadpoolctl; print(json.dumps(["
        "p for p in threadpoolctl.threadpool_info() if p.get('user_api') == 'blas']))"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        pools = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return "unknown (threadpoolctl not installed, or NumPy failed to load)"
    return (
        "; ".join(
            f"{p.get('internal_api')} {p.get('version')} (kernel {p.get('architecture')}, "
            f"{p.get('threading_layer')}, {p.get('num_threads')} threads)"
            for p in pools
        )
        or "none found"
    )


def where_ran(argv: list[str] | None = None) -> None:
    """Print the report's header (where it ran) and, at exit, the load average at its end.

    Worker processes (``--worker``, ``--torch-worker`` in ``argv``) print nothing: their last
    line is their JSON.
    """
    argv = sys.argv if argv is None else argv
    if any(arg.startswith("--") and arg.endswith("worker") for arg in argv) or _START_LOAD:
        return
    _START_LOAD.append(os.getloadavg()[0])
    settings = [f"{v}={os.environ[v]}" for v in THREAD_VARS if os.environ.get(v)]
    if "--threads" in argv[:-1]:  # the script pins (or compares) these counts itself
        settings.append(f"--threads {argv[argv.index('--threads') + 1]}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"## {os.path.basename(argv[0])} {' '.join(argv[1:])}".rstrip(), flush=True)
    print(f"- CPU: {cpu_model()} ({cores} cores this process may use)")
    print(f"- BLAS: {blas_line()}")
    print(f"- threads: {', '.join(settings) or 'nothing set (sadl picks per product)'}")
    print(f"- load average at start: {_load_text()}", flush=True)
    atexit.register(lambda: print(f"\n- load average at end: {_load_text()}", flush=True))


def _load_text() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def judged(now: bool = True) -> str:
    """The empty string when a budget may be judged (load average below ``QUIET_LOAD`` at the
    report's start and, with ``now``, now), else "not judged: load X".

    ``now=False`` for a report that loads the machine itself (bench/threads.py's busy loops).
    """
    load = max(_START_LOAD + [os.getloadavg()[0]] * now)
    return "" if load < QUIET_LOAD else f"not judged: load {load:.1f}"


def verdict(ok: bool, budget: str) -> str:
    """A budget's note: ``budget: ok`` or ``budget: OVER``, or "not judged: load X"."""
    return judged() or f"{budget}: {'ok' if ok else 'OVER'}"


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
    parser.add_argument(
        "--no-torch-compile", action="store_true", help="skip the torch.compile rows (slow)"
    )
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    where_ran()
    set_threads(args.threads)
    return args


def set_threads(n: int, torch_too: bool = True) -> None:
    """Pin BLAS and torch to ``n`` threads (env vars must be set before NumPy loads BLAS).

    ``torch_too=False`` leaves torch unimported: a process measuring sadl's peak RSS must not
    carry torch's (about 150 MiB).
    """
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:
        pass
    torch = optional_torch() if torch_too else None
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


def best_times(fns: list[Callable[[], Any]], *, number: int, repeat: int) -> list[float]:
    """Best mean seconds per call of each function, their rounds alternating: on a shared,
    noisy machine both sides of a ratio then see the same load."""
    for fn in fns:
        for _ in range(3):
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            gc.collect()
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[k] = min(best[k], (time.perf_counter() - start) / number)
    return best


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB.

    On Linux the high-water mark of this process's own memory (``VmHWM``): ``ru_maxrss`` is
    carried over fork and exec, so a worker started by a large driver (one that imported torch)
    would report at least the driver's size.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def row(workload: str, sadl: str, reference: str, ratio: str, note: str = "") -> None:
    print(f"| {workload} | {sadl} | {reference} | {ratio} | {note} |", flush=True)


def header(title: str, threads: int) -> None:
    print(f"\n### {title} ({threads} thread{'s' if threads > 1 else ''})\n", flush=True)
    print("| workload | sadl | reference | ratio (sadl time / reference time) | note |")
    print("|---|---|---|---|---|", flush=True)


#: Seconds a torch.compile worker may take (it compiles C++ kernels first, minutes on one core).
TORCH_COMPILE_TIMEOUT = 900


def run_worker(
    script: str,
    worker: list[str],
    threads: int,
    quick: bool,
    timeout: float | None,
    extra_env: dict[str, str] | None = None,
) -> Any:
    """Run ``script --worker ...`` in a fresh process (``extra_env`` added to its environment);
    its last stdout line is JSON.

    Returns the decoded result, or a short string saying why there is none (it failed, or ran
    out of time: torch.compile needs a C++ toolchain and may be unavailable).
    """
    cmd = [sys.executable, script, "--worker", *worker, "--threads", str(threads)]
    if quick:
        cmd.append("--quick")
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.update(extra_env or {})
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return f"failed: {lines[-1][:120] if lines else f'exit status {proc.returncode}'}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
