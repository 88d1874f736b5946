"""BLAS threads for GPT training: 1 vs 2 threads through ``sadl.set_num_threads``.

Each (config, threads) runs in a fresh process that leaves NumPy's BLAS at its default (one
thread per core) and then calls ``sadl.set_num_threads(n)``, as ``sadl train --threads n`` does.
Configs: S and M of bench/models.py, and the demo run (``sadl train gpt`` defaults: block 64,
3 layers, 4 heads, 96 dims, batch 32). It prints the mean and the best step time and the load
average while it ran: a busy machine (other processes using the cores) and an idle one give
very different answers, so run it on both.

Usage: python bench/threads.py [--quick] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CONFIGS: dict[str, dict[str, int]] = {
    "S": {"vocab": 65, "block": 32, "n_layer": 2, "n_head": 4, "n_embd": 64, "batch": 16},
    "demo": {"vocab": 96, "block": 64, "n_layer": 3, "n_head": 4, "n_embd": 96, "batch": 32},
    "M": {"vocab": 65, "block": 128, "n_layer": 4, "n_head": 4, "n_embd": 128, "batch": 32},
}
STEPS = {"S": 40, "demo": 12, "M": 6}


def _worker(cfg_name: str, threads: int, quick: bool) -> dict[str, Any]:
    import numpy as np
    import sadl
    from sadl_models.gpt import GPT
    from sadl_optim import AdamW

    sadl.set_num_threads(threads)
    cfg = CONFIGS[cfg_name]
    model = GPT(cfg["vocab"], cfg["block"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"], rng=0)
    opt = AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    steps = max(2, STEPS[cfg_name] // (4 if quick else 1))
    batches = [
        rng.integers(0, cfg["vocab"], size=(cfg["batch"], cfg["block"] + 1)) for _ in range(4)
    ]
    times = []
    for i in range(steps + 2):  # two warm-up steps
        data = batches[i % len(batches)]
        start = time.perf_counter()
        _, loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    times = times[2:]
    return {
        "mean": sum(times) / len(times),
        "best": min(times),
        "load": os.getloadavg()[0],
        "blas_threads": sadl.get_num_threads(),
    }


def _run(cfg_name: str, threads: int, quick: bool) -> dict[str, Any] | None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(var, None)  # BLAS starts at its default; the worker sets the count itself
    cmd = [sys.executable, __file__, "--worker", cfg_name, str(threads)]
    if quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"(worker {cfg_name} at {threads} threads failed: {proc.stderr.strip()[-400:]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--worker", nargs=2, metavar=("CONFIG", "THREADS"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker[0], int(args.worker[1]), args.quick)))
        return 0
    counts = [int(t) for t in args.threads.split(",")]
    print(f"\n### GPT training step vs BLAS threads ({os.cpu_count()} cores)\n")
    print("| config | threads | mean step | best step | load average (1 min) |")
    print("|---|---|---|---|---|", flush=True)
    failed = 0
    for cfg_name, cfg in CONFIGS.items():
        size = f"block {cfg['block']}, {cfg['n_layer']}x{cfg['n_embd']}, batch {cfg['batch']}"
        desc = f"{cfg_name} ({size})"
        for threads in counts:
            result = _run(cfg_name, threads, args.quick)
            if result is None:
                failed += 1
                continue
            print(
                f"| {desc} | {threads} (BLAS reports {result['blas_threads']}) | "
                f"{result['mean'] * 1e3:.1f} ms | {result['best'] * 1e3:.1f} ms | "
                f"{result['load']:.1f} |",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
