"""Core engine benchmarks against PyTorch eager and hand-written NumPy.

W1 per-op overhead: an (8, 8) float32 tensor, ``y = y * 1.0001 + 0.0001`` 200 times, sum,
backward; reported as microseconds per op = total / 400.
W2 an MLP 784-256-256-10 training step (ReLU, softmax cross-entropy, SGD) at batch 128.
Graph depth: ``sadl.grad`` against ``backward()`` on one 20,000-op chain (both must be linear).
Each workload also runs under ``sadl.compile`` (traced once, replayed) and, in a process of its
own (it compiles C++ first), under ``torch.compile``; ``--no-torch-compile`` skips those.
Budgets for the compiled runs (1 thread): W1 <= 0.3x PyTorch eager per op; W2 at least
as fast as the hand-written NumPy floor.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import sadl
from _common import (
    TORCH_COMPILE_TIMEOUT,
    best_time,
    header,
    optional_torch,
    parse_args,
    row,
    run_worker,
)


def w1_chain(x: Any) -> Any:
    y = x
    for _ in range(200):
        y = y * 1.0001 + 0.0001
    loss = y.sum()
    loss.backward()
    # Returned, so a compiled replay computes the 400 forward ops; the backward of this linear
    # chain is a constant, which sadl.compile folds (as torch.compile does).
    return loss


def w1_sadl() -> None:
    w1_chain(sadl.Tensor(np.full((8, 8), 0.5, np.float32), requires_grad=True))


def make_w1_compiled():  # type: ignore[no-untyped-def]
    chain = sadl.compile(w1_chain)

    def w1_compiled() -> None:
        chain(sadl.Tensor(np.full((8, 8), 0.5, np.float32), requires_grad=True))

    return w1_compiled


def make_w1_torch(torch):  # type: ignore[no-untyped-def]
    def chain(x: Any) -> Any:
        y = x
        for _ in range(200):
            y = y * 1.0001 + 0.0001
        loss = y.sum()
        loss.backward()
        return loss

    def w1_torch() -> None:
        chain(torch.full((8, 8), 0.5, requires_grad=True))

    w1_torch.chain = chain  # type: ignore[attr-defined]
    return w1_torch


def mlp_data(seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    shapes = [(784, 256), (256, 256), (256, 10)]
    weights = []
    for n_in, n_out in shapes:
        weights.append((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32))
        weights.append(np.zeros(n_out, np.float32))
    return x, y, weights


def make_w2_sadl(compiled: bool = False):  # type: ignore[no-untyped-def]
    x, y, weights = mlp_data()
    params = [sadl.Parameter(w.copy()) for w in weights]
    opt = sadl.SGD(params, lr=0.01)
    xt = sadl.Tensor(x)
    try:
        cross_entropy = sadl.ops.cross_entropy  # the fused op from sadl-layers, if installed
    except AttributeError:
        cross_entropy = None
    targets = y[:, None]

    def step() -> None:
        w1, b1, w2, b2, w3, b3 = params
        h = (xt @ w1 + b1).relu()
        h = (h @ w2 + b2).relu()
        logits = h @ w3 + b3
        if cross_entropy is not None:
            loss = cross_entropy(logits, y)
        else:
            loss = -logits.log_softmax(-1).take_along_axis(targets, 1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return sadl.compile(step) if compiled else step


def make_w2_torch(torch, compiled: bool = False, device: str = "cpu"):  # type: ignore[no-untyped-def]
    """The W2 training step in PyTorch on ``device`` (also bench/gpu.py's)."""
    x, y, weights = mlp_data()
    params = [torch.tensor(w, device=device, requires_grad=True) for w in weights]
    opt = torch.optim.SGD(params, lr=0.01)
    xt, yt = torch.tensor(x, device=device), torch.tensor(y, device=device)

    def step() -> None:
        w1, b1, w2, b2, w3, b3 = params
        h = (xt @ w1 + b1).relu()
        h = (h @ w2 + b2).relu()
        loss = torch.nn.functional.cross_entropy(h @ w3 + b3, yt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return torch.compile(step) if compiled else step


def _torch_compile_worker(workload: str, quick: bool) -> dict[str, float]:
    """Seconds per W1 op / per W2 step under torch.compile (run in a process of its own)."""
    torch = optional_torch()
    repeat = 2 if quick else 7
    if workload == "w1":
        chain = torch.compile(make_w1_torch(torch).chain)
        start = torch.full((8, 8), 0.5)

        def w1() -> None:
            chain(start.clone().requires_grad_(True))

        return {"seconds": best_time(w1, number=30, repeat=repeat, warmup=3) / 400}
    step = make_w2_torch(torch, compiled=True)
    return {"seconds": best_time(step, number=10 if quick else 60, repeat=repeat, warmup=3)}


def _torch_compile_rows(args: Any, reference: dict[str, float]) -> None:
    """torch.compile next to the other rows, or why it could not run."""
    for workload, label, unit in (("w1", "W1 per-op overhead", 1e6), ("w2", "W2 MLP step", 1.0)):
        result = run_worker(
            __file__, ["torch-compile", workload], args.threads, args.quick, TORCH_COMPILE_TIMEOUT
        )
        if isinstance(result, str):
            row(f"{label}, torch.compile", "-", "-", "-", f"torch.compile {result}")
            continue
        seconds = result["seconds"]
        mine = reference[workload]
        if workload == "w1":
            row(
                f"{label} (µs/op), torch.compile",
                f"compiled {mine * unit:.2f}",
                f"torch.compile {seconds * unit:.2f}",
                f"{mine / seconds:.2f}x",
            )
        else:
            row(
                f"{label} (steps/s), torch.compile",
                f"compiled {1 / mine:.0f}",
                f"torch.compile {1 / seconds:.0f}",
                f"{mine / seconds:.2f}x",
            )


def make_w2_numpy():  # type: ignore[no-untyped-def]
    x, y, weights = mlp_data()
    ws = [w.copy() for w in weights]
    rows = np.arange(len(y))

    def step() -> None:
        w1, b1, w2, b2, w3, b3 = ws
        a1 = x @ w1 + b1
        h1 = np.maximum(a1, 0)
        a2 = h1 @ w2 + b2
        h2 = np.maximum(a2, 0)
        z = h2 @ w3 + b3
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        p[rows, y] -= 1
        dz = p / len(y)
        g3, gb3 = h2.T @ dz, dz.sum(0)
        dh2 = dz @ w3.T
        dh2 *= a2 > 0
        g2, gb2 = h1.T @ dh2, dh2.sum(0)
        dh1 = dh2 @ w2.T
        dh1 *= a1 > 0
        g1, gb1 = x.T @ dh1, dh1.sum(0)
        for w, g in zip(ws, (g1, gb1, g2, gb2, g3, gb3)):
            w -= 0.01 * g

    return step


def make_chain(depth: int = 20_000):  # type: ignore[no-untyped-def]
    """A fresh ``depth``-op chain on a small tensor: (leaf, output)."""
    x = sadl.Tensor(np.full((4,), 0.5), requires_grad=True)
    y = x
    for _ in range(depth // 2):
        y = y * 1.0001 + 0.0001
    return x, y.sum()


def grad_vs_backward(repeat: int) -> tuple[float, float]:
    """Seconds for ``sadl.grad`` and for ``backward()`` through a 20,000-op chain (best of n)."""
    import time

    best_grad = best_backward = float("inf")
    for _ in range(repeat):
        x, out = make_chain()
        start = time.perf_counter()
        sadl.grad(out, x)
        best_grad = min(best_grad, time.perf_counter() - start)
        x, out = make_chain()
        start = time.perf_counter()
        out.backward()
        best_backward = min(best_backward, time.perf_counter() - start)
    return best_grad, best_backward


def main() -> None:
    args = parse_args(__doc__ or "")
    if args.worker:
        print(json.dumps(_torch_compile_worker(args.worker[1], args.quick)))
        return
    torch = optional_torch()
    repeat = 2 if args.quick else 7
    header("core: W1 per-op overhead, W2 MLP training step", args.threads)

    number = 5 if args.quick else 30
    t_sadl = best_time(w1_sadl, number=number, repeat=repeat) / 400
    t_compiled = best_time(make_w1_compiled(), number=number, repeat=repeat) / 400
    if torch is not None:
        t_torch = best_time(make_w1_torch(torch), number=30, repeat=repeat) / 400
        for label, mine, budget in (
            ("W1 per-op overhead (µs/op)", t_sadl, "budget <= 1.5x"),
            ("W1 per-op overhead (µs/op), sadl.compile", t_compiled, "budget <= 0.3x"),
        ):
            row(
                label,
                f"{mine * 1e6:.2f}",
                f"torch {t_torch * 1e6:.2f}",
                f"{mine / t_torch:.2f}x",
                budget,
            )
    else:
        row("W1 per-op overhead (µs/op)", f"{t_sadl * 1e6:.2f}", "torch absent", "-")
        row("W1 per-op overhead (µs/op), sadl.compile", f"{t_compiled * 1e6:.2f}", "-", "-")

    t_grad, t_backward = grad_vs_backward(2 if args.quick else 5)
    row(
        "sadl.grad, 20,000-op chain (ms)",
        f"{t_grad * 1e3:.1f}",
        f"backward() {t_backward * 1e3:.1f}",
        f"{t_grad / t_backward:.2f}x",
        "budget <= 3x",
    )

    number = 10 if args.quick else 60
    s_sadl = best_time(make_w2_sadl(), number=number, repeat=repeat)
    s_numpy = best_time(make_w2_numpy(), number=number, repeat=repeat)
    s_compiled = best_time(make_w2_sadl(compiled=True), number=number, repeat=repeat)
    row(
        "W2 MLP step (steps/s)",
        f"{1 / s_sadl:.0f}",
        f"numpy {1 / s_numpy:.0f}",
        f"{s_sadl / s_numpy:.2f}x",
        "budget <= 1.5x the NumPy floor",
    )
    row(
        "W2 MLP step (steps/s), sadl.compile",
        f"{1 / s_compiled:.0f}",
        f"numpy {1 / s_numpy:.0f}",
        f"{s_compiled / s_numpy:.2f}x",
        "budget <= 1.0x the NumPy floor",
    )
    if torch is not None:
        s_torch = best_time(make_w2_torch(torch), number=number, repeat=repeat)
        for label, mine, budget in (
            ("W2 MLP step (steps/s)", s_sadl, "budget <= 1.25x"),
            ("W2 MLP step (steps/s), sadl.compile", s_compiled, ""),
        ):
            row(
                label,
                f"{1 / mine:.0f}",
                f"torch {1 / s_torch:.0f}",
                f"{mine / s_torch:.2f}x",
                budget,
            )
        if not args.no_torch_compile:
            _torch_compile_rows(args, {"w1": t_compiled, "w2": s_compiled})


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
