"""GPU benchmark: training steps per second on CUDA next to the CPU, sadl and PyTorch.

W2   an MLP 784-256-256-10 training step (ReLU, softmax cross-entropy, SGD) at batch 128
     (as bench/core.py).
W3-S a GPT training step (forward, loss, backward, AdamW): block 32, 2 layers, 4 heads,
     64 dims, batch 16 (as bench/models.py's S).
W3-M the same at block 128, 4 layers, 4 heads, 128 dims, batch 32 (bench/models.py's M).

The framework ``sadl.compile`` is sadl's step traced once and replayed (``sadl.compile(step,
fusion=False)``), measured on the benchmarked device only, next to eager sadl there.

Each (framework, device, workload) runs in its own process; a CUDA step is timed between two
synchronizations (kernels are queued asynchronously). The CPU rows use every core the machine
has (BLAS threads unpinned), as a user would.

Usage: python bench/gpu.py [--device cuda] [--quick] [--out DIR]
``--device strict`` runs the sadl rows on the strict CuPy stand-in (a smoke test of this script
without a GPU; its timings mean nothing). Results are printed as a table and written to
``DIR/gpu_bench.json`` and ``DIR/gpu_bench.md`` (DIR: ``--out``, else ``$OUT``, else
``runs/gpu-bench``), with ``gpu_bench.png`` when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WORKLOADS = ("W2", "W3-S", "W3-M")
COMPILED = "sadl.compile"  #: the framework name of sadl's compiled rows


# ---------------------------------------------------------------------------------- timing
def _timed(step: Callable[[], None], sync: Callable[[], None], quick: bool) -> float:
    """Best mean seconds per step over a few rounds, synchronized around each round."""
    number, rounds = (3, 2) if quick else (10, 5)
    for _ in range(3):
        step()
    sync()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            step()
        sync()
        best = min(best, (time.perf_counter() - start) / number)
    return best


# ---------------------------------------------------------------------------------- sadl
def _sadl_sync(device: str) -> Callable[[], None]:
    import sadl

    return lambda: sadl.backends.synchronize(device)


def _sadl_w2(device: str, compiled: bool = False) -> Callable[[], None]:
    import sadl
    from core import mlp_data

    x, y, weights = mlp_data()
    params = [sadl.Parameter(w, device=device) for w in weights]
    opt = sadl.SGD(params, lr=0.01)
    xt = sadl.tensor(x, device=device)
    yt = sadl.tensor(y, device=device).data
    cross_entropy = sadl.ops.cross_entropy

    def train(x: Any, y: Any) -> Any:
        w1, b1, w2, b2, w3, b3 = params
        h = (x @ w1 + b1).relu()
        h = (h @ w2 + b2).relu()
        loss = cross_entropy(h @ w3 + b3, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = sadl.compile(train, fusion=False) if compiled else train

    def step() -> None:
        run(xt, yt)

    return step


def _sadl_w3(device: str, cfg_name: str, compiled: bool = False) -> Callable[[], None]:
    from models import CONFIGS, _batches, _sadl_train_step

    cfg = CONFIGS[cfg_name]
    step: Callable[[], None] = _sadl_train_step(
        cfg, _batches(cfg, 4), compiled, device=device, fusion=False
    )[0]
    return step


# ---------------------------------------------------------------------------------- torch
def _torch_w2(device: str) -> Callable[[], None]:
    import torch
    from core import make_w2_torch

    step: Callable[[], None] = make_w2_torch(torch, device=device)
    return step


def _torch_w3(device: str, cfg_name: str) -> Callable[[], None]:
    import torch
    from models import CONFIGS, _batches, _torch_model, _torch_train_step

    cfg = CONFIGS[cfg_name]
    data = [
        (torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
        for x, y in _batches(cfg, 4)
    ]
    step: Callable[[], None] = _torch_train_step(_torch_model(cfg).to(device), data)
    return step


def _torch_sync(device: str) -> Callable[[], None]:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def _worker(framework: str, device: str, workload: str, quick: bool) -> dict[str, Any]:
    if framework.startswith("sadl"):
        compiled = framework == COMPILED
        sync = _sadl_sync(device)
        if workload == "W2":
            step = _sadl_w2(device, compiled)
        else:
            step = _sadl_w3(device, workload.split("-")[1], compiled)
    else:
        make, sync = (_torch_w2, _torch_w3), _torch_sync(device)
        step = make[0](device) if workload == "W2" else make[1](device, workload.split("-")[1])
    seconds = _timed(step, sync, quick)
    return {"seconds": seconds, "steps_per_s": 1.0 / seconds}


# ---------------------------------------------------------------------------------- driver
def _run(framework: str, device: str, workload: str, quick: bool) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--worker", framework, device, workload]
    if quick:
        cmd.append("--quick")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"({framework} {workload} on {device} failed: {proc.stderr.strip()[-600:]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _available(framework: str, device: str) -> bool:
    if device == "cpu":
        return framework == "sadl" or _has_torch()
    if framework == "torch":
        return device.startswith("cuda") and _has_torch() and _torch_cuda()
    # sadl and sadl.compile
    import sadl

    return device.split(":")[0] in sadl.testing.available_devices()


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torch_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _write(out: Path, results: list[dict[str, Any]], device: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_bench.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["| workload | framework | device | steps/s | ms/step |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r['workload']} | {r['framework']} | {r['device']} | {r['steps_per_s']:.1f} | "
            f"{r['seconds'] * 1e3:.2f} |"
        )
    (out / "gpu_bench.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(WORKLOADS), figsize=(4 * len(WORKLOADS), 3.2))
    for ax, workload in zip(axes, WORKLOADS):
        rows = [r for r in results if r["workload"] == workload]
        ax.bar([f"{r['framework']}\n{r['device']}" for r in rows], [r["steps_per_s"] for r in rows])
        ax.set_title(f"{workload} (steps/s, higher is better)", fontsize=9)
        ax.tick_params(labelsize=8)
    fig.suptitle(f"sadl vs PyTorch, CPU and {device}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "gpu_bench.png", dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--out", default=os.environ.get("OUT") or str(HERE.parent / "runs/gpu-bench")
    )
    parser.add_argument("--worker", nargs=3, metavar=("FRAMEWORK", "DEVICE", "WORKLOAD"))
    args = parser.parse_args()
    if args.worker:
        framework, device, workload = args.worker
        print(json.dumps(_worker(framework, device, workload, args.quick)))
        return 0

    runs = [
        ("sadl", "cpu"),
        ("sadl", args.device),
        (COMPILED, args.device),
        ("torch", "cpu"),
        ("torch", args.device),
    ]
    runs = [(f, d) for f, d in runs if _available(f, d)]
    if ("sadl", args.device) not in runs:
        print(f"bench/gpu.py: device {args.device!r} is not usable here", file=sys.stderr)
        return 2
    print("| workload | framework | device | steps/s | ms/step | vs sadl on the CPU |")
    print("|---|---|---|---|---|---|", flush=True)
    results: list[dict[str, Any]] = []
    failed = 0
    for workload in WORKLOADS:
        base = None
        for framework, device in runs:
            got = _run(framework, device, workload, args.quick)
            if got is None:
                failed += 1
                continue
            if (framework, device) == ("sadl", "cpu"):
                base = got["seconds"]
            speedup = f"{base / got['seconds']:.2f}x" if base else "n/a"
            print(
                f"| {workload} | {framework} | {device} | {got['steps_per_s']:.1f} | "
                f"{got['seconds'] * 1e3:.2f} | {speedup} |",
                flush=True,
            )
            results.append({"workload": workload, "framework": framework, "device": device, **got})
    _write(Path(args.out), results, args.device)
    print(f"\nwritten: {Path(args.out) / 'gpu_bench.json'} (and .md, .png)")
    return 1 if failed else 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
