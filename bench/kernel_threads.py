"""sadl-kernels' kernels on 1 thread and on 2: the speedup per kernel on W3-M's shapes.

W3-M (bench/models.py's M step: batch 32, block 128, 4 layers x 128, MLP 512) calls each kernel
on these arrays (one call per op application): the norms on (4096, 128), GELU (with and
without the folded bias) on the (4096, 512) hidden layer, the attention's softmax on
(32, 4, 128, 128), AdamW on the flat group of about 0.8 M parameters. Each kernel is timed
serially (its one-thread compilation, what it runs below two threads' share) and in parallel on
2 threads, alternating, the minimum of ``--repeats`` rounds of ``--calls`` calls each (the
machine may be shared: minima are the least disturbed). ``--sizes`` times GELU forward on
growing arrays, to place ``sadl_kernels._jit.PER_THREAD`` (where two threads start to pay).
``--step`` times the compiled W3-M step (bench/models.py's worker, a fresh process each, the
thread variables set to 1 or 2 as ``bench/models.py --threads N`` sets them) at 1 and 2 threads,
alternating, ``--repeats`` processes each, and prints the minima and their ratio (the issue's
target: the 2-thread step at least 1.7x faster).

Usage: python bench/kernel_threads.py [--repeats 7] [--calls 50] [--sizes | --step]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
from sadl_kernels import _bias, _gelu, _jit, _norm, _optim, _softmax


def _cases():
    rng = np.random.default_rng(0)
    f32 = np.float32
    n, d = 4096, 128  # W3-M's norms: the whole (batch * block, n_embd) array in one kernel call
    x = rng.standard_normal((n, d)).astype(f32)
    w, b = rng.standard_normal(d).astype(f32), rng.standard_normal(d).astype(f32)
    stats, y = np.empty((4, n), f32), np.empty_like(x)
    g = rng.standard_normal((n, d)).astype(f32)
    packed = np.empty(n * d + 2 * d, f32)
    sums = np.empty((2, (n + _norm.ROWS - 1) // _norm.ROWS, d))
    flags = np.array([True, True, True, True])
    h = rng.standard_normal((4096, 512)).astype(f32)  # W3-M's MLP hidden layer
    o, hb = np.empty_like(h), rng.standard_normal(512).astype(f32)
    st0 = rng.standard_normal((32, 4, 128, 128)).astype(f32)
    st = st0.copy()
    bias = np.triu(np.full((128, 128), -np.inf, f32), 1).T.copy()
    nparam = 790_000
    data, grad = rng.standard_normal(nparam).astype(f32), rng.standard_normal(nparam).astype(f32)
    m, v = np.zeros(nparam, f32), np.zeros(nparam, f32)
    state = {"step": 0, "exp_avg": m, "exp_avg_sq": v}
    group = {"lr": 1e-3, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1}
    return {
        "layer_norm forward (4096, 128)": lambda: _norm.norm_forward_into(
            x, w, b, stats, y, n, d, True, 2, 1 / d, 1e-5
        ),
        "layer_norm backward (4096, 128)": lambda: _norm.norm_backward_into(
            g, x, w, stats, packed, sums, n, d, flags, 1 / d, 1e-5
        ),
        "gelu forward (4096, 512)": lambda: _gelu.gelu_forward_into(h, o),
        "gelu+bias forward (4096, 512)": lambda: _bias.gelu_forward_bias_into(h, hb * 0, o),
        "gelu backward (4096, 512)": lambda: _gelu.gelu_backward_into(h, h, o),
        "softmax (32, 4, 128, 128)": lambda: _softmax.softmax_into(st0, bias, st, 2, False),
        "softmax backward (32, 4, 128, 128)": lambda: _softmax.softmax_backward_into(
            st0, st0, st, 2, False
        ),
        "adamw flat 790 K": lambda: _optim._run_adam(data, grad, state, group, decoupled=True),
    }


def _time(fn, threads, calls):
    _jit.threads_for = lambda work, per: threads
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--sizes", action="store_true")
    parser.add_argument("--step", action="store_true")
    args = parser.parse_args()
    if args.step:
        _step(args.repeats)
        return
    print(f"numba {numba.__version__}, NUMBA_NUM_THREADS {numba.config.NUMBA_NUM_THREADS}")
    print(f"load average at start: {os.getloadavg()}")
    cases = _cases()
    if args.sizes:
        cases = {}
        for size in (1 << k for k in range(12, 20)):
            xs = np.linspace(-3, 3, size, dtype=np.float32)
            os_ = np.empty_like(xs)
            cases[f"gelu forward {size}"] = lambda xs=xs, os_=os_: _gelu.gelu_forward_into(xs, os_)
    for name, fn in cases.items():
        best = {1: float("inf"), 2: float("inf")}
        for _ in range(args.repeats):
            for threads in (1, 2):
                best[threads] = min(best[threads], _time(fn, threads, args.calls))
        print(
            f"{name:36s} 1 thread {best[1] * 1e6:9.1f} us   2 threads {best[2] * 1e6:9.1f} us"
            f"   speedup {best[1] / best[2]:.2f}x"
        )
    print(f"threading layer: {numba.threading_layer()}")
    print(f"load average at end: {os.getloadavg()}")


def _step(repeats: int) -> None:
    models = Path(__file__).with_name("models.py")
    print(f"load average at start: {os.getloadavg()}")
    best = {1: float("inf"), 2: float("inf")}
    for _ in range(repeats):
        for threads in (1, 2):
            env = dict(os.environ)
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = str(threads)
            cmd = [sys.executable, str(models), "--worker", "sadl-compiled", "step", "M"]
            out = subprocess.run(
                [*cmd, "--threads", str(threads), "--quick"],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            ).stdout
            seconds = json.loads(out.strip().splitlines()[-1])["seconds"]
            best[threads] = min(best[threads], seconds)
            print(f"  {threads} thread(s): {seconds * 1e3:.1f} ms", flush=True)
    print(
        f"compiled W3-M step: 1 thread {best[1] * 1e3:.1f} ms, 2 threads {best[2] * 1e3:.1f} ms,"
        f" speedup {best[1] / best[2]:.2f}x"
    )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
