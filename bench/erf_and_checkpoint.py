"""Core's erf against np.tanh, exact GELU against its tanh form, and activation checkpointing.

erf: ``sadl.ops.erf`` on a 1M-element array (float32 and float64) against ``np.tanh``.
GELU: ``x (1 + erf(x / sqrt 2)) / 2`` against ``x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2``,
float32, 1M elements, both computed in 64K-element blocks as sadl-layers does (budget <= 2x).
Checkpoint: a 16-block residual MLP (width 256, hidden 1024, batch 1024, float32), one forward
and backward: peak traced memory (tracemalloc) and time, with and without ``sadl.checkpoint``.
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import sadl
from _common import best_time, header, optional_torch, parse_args, row

N = 1_000_000
BLOCK = 65536
SQRT_HALF = np.float32(1 / math.sqrt(2))
TANH_C = np.float32(math.sqrt(2 / math.pi))
TANH_A = np.float32(0.044715 * math.sqrt(2 / math.pi))


def blockwise(kernel: Callable[[Any, Any], None], x: Any) -> Any:
    out = np.empty_like(x)
    for start in range(0, x.size, BLOCK):
        kernel(x[start : start + BLOCK], out[start : start + BLOCK])
    return out


def gelu_exact(x: Any, out: Any) -> None:
    e = sadl.ops.erf(x * SQRT_HALF)
    e += 1
    e *= x
    np.multiply(e, 0.5, out=out)


def gelu_tanh(x: Any, out: Any) -> None:
    s = x * x
    s *= TANH_A
    s += TANH_C
    s *= x
    np.tanh(s, out=s)
    s += 1
    s *= x
    np.multiply(s, 0.5, out=out)


def make_stack(depth: int = 16, width: int = 256, hidden: int = 1024) -> list[Any]:
    rng = np.random.default_rng(0)
    shapes = [(width, hidden), (hidden, width)] * depth
    scale = [1 / math.sqrt(a) for a, _ in shapes]
    return [
        sadl.Parameter((rng.standard_normal(s) * c).astype(np.float32))
        for s, c in zip(shapes, scale)
    ]


def block(h: Any, w1: Any, w2: Any) -> Any:
    return h + np.tanh(h @ w1) @ w2


def step(weights: list[Any], x: Any, checkpointed: bool) -> None:
    h = x
    for w1, w2 in zip(weights[::2], weights[1::2]):
        h = sadl.checkpoint(block, h, w1, w2) if checkpointed else block(h, w1, w2)
    (h * h).mean().backward()
    for w in weights:
        w.grad = None


def peak_megabytes(fn: Callable[[], None]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def main() -> None:
    args = parse_args(__doc__ or "")
    torch = optional_torch()
    repeat = 2 if args.quick else 7
    number = 3 if args.quick else 10
    header("core: erf, exact GELU, activation checkpointing", args.threads)
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(N).astype(dtype)
        t_erf = best_time(lambda x=x: sadl.ops.erf(x), number=number, repeat=repeat)
        t_tanh = best_time(lambda x=x: np.tanh(x), number=number, repeat=repeat)
        reference = f"np.tanh {t_tanh * 1e3:.2f}"
        if torch is not None:
            tx = torch.from_numpy(x)
            t_torch = best_time(lambda tx=tx: torch.erf(tx), number=number, repeat=repeat)
            reference += f", torch.erf {t_torch * 1e3:.2f}"
        name = np.dtype(dtype).name
        row(f"erf, 1M {name} (ms)", f"{t_erf * 1e3:.2f}", reference, f"{t_erf / t_tanh:.1f}x")

    x = rng.standard_normal(N).astype(np.float32)
    t_exact = best_time(lambda: blockwise(gelu_exact, x), number=number, repeat=repeat)
    t_approx = best_time(lambda: blockwise(gelu_tanh, x), number=number, repeat=repeat)
    row(
        "exact GELU via sadl.ops.erf, 1M float32 (ms)",
        f"{t_exact * 1e3:.2f}",
        f"tanh form {t_approx * 1e3:.2f}",
        f"{t_exact / t_approx:.2f}x",
        "budget <= 2x",
    )

    weights = make_stack()
    inputs = sadl.tensor(rng.standard_normal((1024, 256)).astype(np.float32))
    plain = peak_megabytes(lambda: step(weights, inputs, False))
    checked = peak_megabytes(lambda: step(weights, inputs, True))
    row(
        "16-block MLP fwd+bwd, peak traced memory (MB)",
        f"checkpoint {checked:.0f}",
        f"plain {plain:.0f}",
        f"{checked / plain:.2f}x",
    )
    n = 1 if args.quick else 3
    t_checked = best_time(lambda: step(weights, inputs, True), number=n, repeat=repeat, warmup=1)
    t_plain = best_time(lambda: step(weights, inputs, False), number=n, repeat=repeat, warmup=1)
    row(
        "16-block MLP fwd+bwd, time (ms)",
        f"checkpoint {t_checked * 1e3:.0f}",
        f"plain {t_plain * 1e3:.0f}",
        f"{t_checked / t_plain:.2f}x",
        "one more forward: ~1.3x",
    )


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
