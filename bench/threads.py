"""BLAS threads: sadl's per-product policy against one thread and against every core.

sadl picks the BLAS thread count per matrix product (``sadl._threads``; docs/getting-started.md,
"Threads"). This measures it, each row in a fresh process:

* ``policy``: nothing set (no thread variable, no ``sadl.set_num_threads``): what a user gets;
* ``N threads`` for each N of ``--threads`` (default ``1,<cores>``): ``OPENBLAS_NUM_THREADS=N``
  (and OMP/MKL), so sadl leaves the BLAS alone; at the core count that is what NumPy does by
  itself, and what sadl did before the policy.

The workloads: the autodidact loop (``nn.GPT(vocab=65, block_size=32, n_layer=2, n_head=4,
n_embd=64)``, AdamW, batch 16, as a plain script writes it) and W3-M (bench/models.py's M step:
block 128, 4 layers x 128, batch 32), eager and compiled. Once on the machine as it is
("idle" when nothing else runs), once with two busy-loop processes started by this script
("loaded"). On the idle run, a (4096, 4096) @ (4096, 4096) float32 product through sadl
against ``np.matmul`` at NumPy's threads in the same process. It prints the load average and
judges:

* loaded: the policy at most 1.3x the one-thread time, for every workload (mean step; the
  policy and one thread run twice each, alternating, and the better run of each counts);
* idle: the 4096 product through sadl at least 90% of NumPy's speed; W3-M's policy time (eager
  and compiled) at most the best of the fixed settings (within 5%, the noise of one run).

Each run times 40 steps of the loop and 6 of W3-M after two warm-up steps, or fewer (at least
three) once 20 seconds have passed. The exit status is 1 when a judgement fails (``--quick``, a
smoke test, judges nothing).

``--crossover`` times single products of growing size at one thread and at every core (pinned
through threadpoolctl), to place ``sadl._threads.PER_THREAD``.

``--only together`` (also part of the full run): the autodidact loop started at the same moment
as two fresh busy-loop processes, five runs of the policy and of ``OPENBLAS_NUM_THREADS=1``
alternating; every policy run at most 1.3x the one-thread runs' median. Each row shows the free
cores the policy judged and the CPU seconds of the BLAS's worker threads (0 when no product ran
on a second thread).

Usage: python bench/threads.py [--quick] [--crossover] [--only idle|loaded|together]
       [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
SETTINGS: dict[str, int | None] = {"policy": None}  # and "N threads", from --threads
STEPS = {"S": 40, "M": 6, "Mc": 6}
ROUNDS = 2  # runs of the policy and of one thread, alternating
SECONDS = 20  # a run stops after this many seconds of timed steps (the trap's take minutes)


# ---------------------------------------------------------------------------------- workers
def _timed(step: Any, steps: int) -> list[float]:
    """Seconds of each of ``steps`` calls of ``step`` after two warm-up calls; it stops early
    (after at least three) once the timed calls passed ``SECONDS``."""
    times: list[float] = []
    for i in range(steps + 2):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        if i >= 4 and sum(times[2:]) > SECONDS:
            break
    return times[2:]


def _loop_s(steps: int) -> list[float]:
    """The autodidact loop, as a plain script writes it."""
    import numpy as np
    import sadl

    tokens = np.random.default_rng(0).integers(0, 65, size=20_000)
    model = sadl.nn.GPT(vocab=65, block_size=32, n_layer=2, n_head=4, n_embd=64)
    opt = sadl.optim.AdamW(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)

    def step() -> None:
        x, y = sadl.data.windows(tokens, 32, 16, rng)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return _timed(step, steps)


def _loop_m(steps: int, compiled: bool = False) -> list[float]:
    """W3-M: bench/models.py's GPT step at config M, eager or under ``sadl.compile``."""
    from models import CONFIGS, _batches, _sadl_train_step

    step, _ = _sadl_train_step(CONFIGS["M"], _batches(CONFIGS["M"], 4), compiled=compiled)
    return _timed(step, steps)


def _big_product(repeat: int) -> dict[str, float]:
    """Best seconds of a (4096, 4096) @ (4096, 4096) float32 product, through sadl and NumPy."""
    import numpy as np
    import sadl

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((4096, 4096), dtype=np.float32) for _ in range(2))
    ta, tb = sadl.tensor(a), sadl.tensor(b)
    best = {"sadl": float("inf"), "numpy": float("inf")}
    for _ in range(repeat):  # alternating, so a change in load hits both
        for name, run in (("sadl", lambda: ta @ tb), ("numpy", lambda: np.matmul(a, b))):
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def _worker(kind: str, quick: bool) -> dict[str, Any]:
    from sadl import _threads

    if kind == "big":
        result: dict[str, Any] = _big_product(1 if quick else 3)
    else:
        steps = max(3, STEPS[kind] // (4 if quick else 1))
        loop = {"S": _loop_s, "M": _loop_m, "Mc": lambda n: _loop_m(n, compiled=True)}[kind]
        times = loop(steps)  # after two warm-up steps (the compiled step traces in them)
        result = {"mean": sum(times) / len(times), "best": min(times)}
    result["load"] = os.getloadavg()[0]
    result["workers cpu"] = _other_threads_cpu()
    result["policy"] = "on" if _threads._blas else "off"
    result["free cores"] = _threads._decided[0] if _threads._decided else "-"
    return result


def _other_threads_cpu() -> float:
    """CPU seconds of this process's threads but the main one: OpenBLAS's workers, busy only
    when a product ran on more than one thread (0 where there is no /proc)."""
    ticks = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            if int(tid) != os.getpid():
                with open(f"/proc/self/task/{tid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
    except OSError:
        return 0.0
    return ticks / os.sysconf("SC_CLK_TCK")


def _run(kind: str, threads: int | None, quick: bool) -> dict[str, Any] | None:
    env = {k: v for k, v in os.environ.items() if k not in _VARS and k != "OPENBLAS_CORETYPE"}
    if threads is not None:
        env.update(dict.fromkeys(_VARS, str(threads)))
    cmd = [sys.executable, __file__, "--worker", kind] + (["--quick"] if quick else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"(worker {kind} at {threads} threads failed: {proc.stderr.strip()[-600:]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------- phases
def _label(threads: int) -> str:
    return f"{threads} thread{'s' if threads > 1 else ''}"


def _busy_processes(n: int) -> list[subprocess.Popen[bytes]]:
    code = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def _steps_table(phase: str, quick: bool) -> dict[tuple[str, str], float]:
    """Per workload: the policy and one thread in alternating runs (``ROUNDS`` each, the best
    mean kept: the machine's load drifts between runs), then each other setting once."""
    names = {
        "S": "autodidact loop (block 32, 2 x 64, batch 16)",
        "M": "W3-M (block 128, 4 x 128, batch 32)",
        "Mc": "W3-M compiled",
    }
    print(f"\n### {phase}: GPT training step ({CORES} cores)\n")
    print(
        "| workload | setting | mean step | best step | runs | load average | policy, free cores |"
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    means = {}
    paired = [s for s in SETTINGS if s in ("policy", _label(1))]
    order = paired * (1 if quick else ROUNDS) + [s for s in SETTINGS if s not in paired]
    for kind in names:
        runs: dict[str, list[dict[str, Any]]] = {}
        for setting in order:
            r = _run(kind, SETTINGS[setting], quick)
            if r is not None:
                runs.setdefault(setting, []).append(r)
        for setting, results in runs.items():
            r = min(results, key=lambda r: float(r["mean"]))
            means[kind, setting] = r["mean"]
            print(
                f"| {names[kind]} | {setting} | {r['mean'] * 1e3:.1f} ms | {r['best'] * 1e3:.1f} ms"
                f" | {len(results)} | {r['load']:.1f} | {r['policy']}, {r['free cores']} |",
                flush=True,
            )
    return means


def _judge(label: str, ratio: float, limit: float, above: bool = False) -> bool:
    """Print the verdict; a failure counts only on a machine that was quiet at the start (the
    busy loops this script starts do not count)."""
    from _common import judged

    ok = ratio >= limit if above else ratio <= limit
    sign = ">=" if above else "<="
    busy = judged(now=False)
    print(f"- {label}: {ratio:.2f} ({busy or ('PASS' if ok else 'FAIL')}: needs {sign} {limit})")
    return ok or bool(busy)


def _phase_idle(quick: bool) -> bool:
    ok = True
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"\n(the machine is not idle: load average {load:.1f}; judged all the same)")
    means = _steps_table("idle (the machine as it is)", quick)
    big = _run("big", None, quick)
    print()
    if big is not None:
        print(
            f"(4096, 4096) @ (4096, 4096) float32, best of {1 if quick else 3}: sadl "
            f"{big['sadl']:.2f} s, NumPy {big['numpy']:.2f} s (load average {big['load']:.1f})"
        )
        ok &= _judge("sadl's speed / NumPy's", big["numpy"] / big["sadl"], 0.9, above=True)
    for kind, name in (("M", "W3-M"), ("Mc", "W3-M compiled")):
        fixed = [t for (k, setting), t in means.items() if k == kind and setting != "policy"]
        if (kind, "policy") in means and fixed:
            ratio = means[kind, "policy"] / min(fixed)
            ok &= _judge(f"idle, {name}: policy / best fixed setting", ratio, 1.05)
    return ok


def _phase_loaded(quick: bool) -> bool:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the busy loops are ended
    busy = _busy_processes(2)
    try:
        time.sleep(2)
        means = _steps_table("loaded (2 busy-loop processes)", quick)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print()
    ok = True
    for kind, name in (("S", "autodidact loop"), ("M", "W3-M"), ("Mc", "W3-M compiled")):
        if (kind, "policy") in means and (kind, _label(1)) in means:
            ratio = means[kind, "policy"] / means[kind, _label(1)]
            ok &= _judge(f"loaded, {name}: policy / 1 thread", ratio, 1.3)
    return ok


#: Runs of each setting with busy processes started at the same moment as the loop.
RUNS_TOGETHER = 5


def _phase_together(quick: bool) -> bool:
    """The autodidact loop started at the same moment as two busy-loop processes (fresh ones
    each run, so no load average has seen them): the policy against ``OPENBLAS_NUM_THREADS=1``,
    alternating; every policy run must be at most 1.3x the one-thread runs' median."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the busy loops are ended
    runs: dict[str, list[dict[str, Any]]] = {"policy": [], _label(1): []}
    print(f"\n### started together with 2 busy-loop processes: autodidact loop ({CORES} cores)\n")
    print("| run | setting | mean step | best step | free cores judged | BLAS workers' CPU |")
    print("|---|---|---|---|---|---|", flush=True)
    for i in range(1 if quick else RUNS_TOGETHER):
        for setting, threads in (("policy", None), (_label(1), 1)):
            busy = _busy_processes(2)  # and the loop right after: the same moment
            try:
                r = _run("S", threads, quick)
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
            if r is not None:
                runs[setting].append(r)
                print(
                    f"| {i + 1} | {setting} | {r['mean'] * 1e3:.1f} ms | {r['best'] * 1e3:.1f} ms "
                    f"| {r['free cores']} | {r['workers cpu']:.2f} s |",
                    flush=True,
                )
    print()
    ones = sorted(r["mean"] for r in runs[_label(1)])
    if not ones or not runs["policy"]:
        print("- started together: no runs to compare (a worker failed)")
        return False
    one = ones[len(ones) // 2]
    ok = True
    for i, r in enumerate(runs["policy"]):
        ok &= _judge(
            f"started together, run {i + 1}: policy / 1 thread (median)", r["mean"] / one, 1.3
        )
    return ok


def _crossover(quick: bool) -> None:
    """Single products at 1 thread and at every core, pinned through threadpoolctl."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    shapes = [(n, n, n) for n in (64, 96, 128, 160, 192, 256, 320, 384, 512, 768)]
    shapes += [(512, 64, 256), (4096, 128, 128), (4096, 128, 512)]
    rng = np.random.default_rng(0)
    print(f"\n### One product, float32: 1 thread vs {CORES} ({os.getloadavg()[0]:.1f} load)\n")
    print("| (n, k, m) | multiply-adds | 1 thread | all cores | speedup |")
    print("|---|---|---|---|---|", flush=True)
    for n, k, m in shapes:
        a = rng.standard_normal((n, k), dtype=np.float32)
        b = rng.standard_normal((k, m), dtype=np.float32)
        number = max(1, int(2e8 // (n * k * m)) // (4 if quick else 1))
        best = {}
        for threads in (1, CORES, 1, CORES):  # alternating
            with threadpool_limits(threads, user_api="blas"):
                np.matmul(a, b)
                start = time.perf_counter()
                for _ in range(number):
                    np.matmul(a, b)
                t = (time.perf_counter() - start) / number
            best[threads] = min(best.get(threads, t), t)
        print(
            f"| ({n}, {k}, {m}) | {n * k * m / 1e6:.2f} M | {best[1] * 1e6:.0f} us | "
            f"{best[CORES] * 1e6:.0f} us | {best[1] / best[CORES]:.2f}x |",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    parser.add_argument("--crossover", action="store_true", help="single products only")
    parser.add_argument("--only", choices=("idle", "loaded", "together"))
    parser.add_argument("--threads", default=f"1,{CORES}", help="fixed settings to compare")
    parser.add_argument("--worker", metavar="KIND", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker, args.quick)))
        return 0
    if args.crossover:
        _crossover(args.quick)
        return 0
    SETTINGS.update({_label(n): n for n in map(int, args.threads.split(","))})
    ok = True
    if args.only in (None, "idle"):
        ok &= _phase_idle(args.quick)
    if args.only in (None, "loaded"):
        ok &= _phase_loaded(args.quick)
    if args.only in (None, "together"):
        ok &= _phase_together(args.quick)
    if args.quick:
        print("(--quick: a smoke test, nothing judged)")
        return 0
    return 0 if ok else 1


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
