"""Data-parallel scaling on this machine: W3-M training steps/s, same global batch of 32.

W3-M is the GPT training step of bench/models.py, config M (vocab 65, block 128, 4 layers,
4 heads, 128 dims; forward, loss, backward, AdamW). Each setting runs in fresh processes:

  1 process  x 1 thread     batch 32
  1 process  x 2 threads    batch 32 (BLAS threads)
  2 processes x 1 thread    batch 16 each, DistributedDataParallel (gradients averaged)
  2 processes x 1 thread    batch 16 each, no averaging: the ceiling communication could reach

Scaling efficiency = (steps/s with 2 processes) / (2 x steps/s with 1 process x 1 thread).
The processes are started by sadl_distributed.launch (mpiexec, the mpich wheel's). It sets
its own thread counts, so bench/run.py runs it once.

Usage: python bench/distributed.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CONFIG = {"vocab": 65, "block": 128, "n_layer": 4, "n_head": 4, "n_embd": 128, "batch": 32}


def _repeats(quick: bool) -> tuple[int, int]:
    """(steps per round, rounds)."""
    return (2, 2) if quick else (4, 5)


# ---------------------------------------------------------------------------------- worker
def worker(mode: str, quick: bool) -> dict[str, Any] | None:
    """One rank's measurement; returns the result on rank 0 (None elsewhere)."""
    import time

    import numpy as np
    import sadl_distributed as dist
    from _common import peak_rss_mib
    from sadl_models.gpt import GPT
    from sadl_optim import AdamW, param_groups_for_weight_decay

    dist.init()
    cfg = CONFIG
    model: Any = GPT(
        cfg["vocab"], cfg["block"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"], rng=0
    )
    if mode == "ddp":
        model = dist.DistributedDataParallel(model)
    opt = AdamW(param_groups_for_weight_decay(model, 0.1), lr=1e-3, betas=(0.9, 0.99))
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg["vocab"], size=200_000)
    batches = [
        dist.windows(tokens, cfg["block"], cfg["batch"], np.random.default_rng(i), check=False)
        for i in range(4)
    ]
    step_no = [0]

    def step() -> None:
        x, y = batches[step_no[0] % len(batches)]
        step_no[0] += 1
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    number, repeat = _repeats(quick)
    for _ in range(2):
        step()
    best = float("inf")
    for _ in range(repeat):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(number):
            step()
        dist.barrier()  # a round ends when the slowest rank is done
        best = min(best, (time.perf_counter() - start) / number)
    if not dist.is_main_process():
        return None
    return {
        "seconds": best,
        "ranks": dist.world_size(),
        "local_batch": int(batches[0][0].shape[0]),
        "peak_rss_mib": peak_rss_mib(),
    }


# ---------------------------------------------------------------------------------- driver
def _env(threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def _run(mode: str, ranks: int, threads: int, quick: bool) -> dict[str, Any] | None:
    argv = [sys.executable, __file__, "--worker", mode] + (["--quick"] if quick else [])
    if ranks > 1:
        from sadl_distributed.launch import mpiexec_command

        argv = mpiexec_command(ranks, argv)
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(threads))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"({mode} x{ranks} failed: {(proc.stdout + proc.stderr).strip()[-600:]})")
        return None
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="ignored: settings are fixed")
    parser.add_argument("--worker", choices=["plain", "ddp"])
    args = parser.parse_args()
    if args.worker:
        result = worker(args.worker, args.quick)
        if result is not None:
            print(json.dumps(result), flush=True)
        return 0

    print("\n### distributed: W3-M GPT training step, global batch 32 on this machine\n")
    print("| setting | steps/s | speedup over 1 process x 1 thread | efficiency per core |")
    print("|---|---|---|---|", flush=True)
    settings = [  # label, worker, processes, threads each
        ("1 process x 1 thread, batch 32", "plain", 1, 1),
        ("1 process x 2 threads, batch 32", "plain", 1, 2),
        ("2 processes x 1 thread, batch 16 each, DDP", "ddp", 2, 1),
        ("2 processes x 1 thread, batch 16 each, no averaging (ceiling)", "plain", 2, 1),
    ]
    results = {}
    for label, mode, ranks, threads in settings:
        res = results[label] = _run(mode, ranks, threads, args.quick)
        base = results[settings[0][0]]
        if res is None or base is None:
            print(f"| {label} | failed | | |", flush=True)
            continue
        speedup = base["seconds"] / res["seconds"]
        print(
            f"| {label} | {1 / res['seconds']:.2f} ({res['seconds'] * 1e3:.0f} ms/step) "
            f"| {speedup:.2f}x | {speedup / (ranks * threads):.0%} |",
            flush=True,
        )
    failed = any(r is None for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
