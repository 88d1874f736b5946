"""sadl-kernels: each kernel's op compiled with and without the plugin, in alternating rounds.

The reference is the same ``sadl.compile`` step traced with ``SADL_KERNELS=0`` (core's passes:
the NumPy calls the kernel replaces). Workloads are W3-M's shapes: a (4096, 128) layer norm, a
(4096, 512) tanh GELU, a (32, 4, 128, 32) causal attention (each forward and backward), and an
AdamW step over 786K float32 parameters (three 512 x 512 matrices, one flat group).

Usage: python bench/kernels.py [--threads 1] [--quick]
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import sadl
from _common import best_times, header, parse_args, row


def _layer_norm(x: Any, w: Any, b: Any, g: Any) -> Any:
    y = sadl.ops.layer_norm(x, w, b)
    (y * g).sum().backward()
    return y


def _gelu(x: Any, g: Any) -> Any:
    y = sadl.ops.gelu(x, approximate="tanh")
    (y * g).sum().backward()
    return y


def _attention(q: Any, k: Any, v: Any, g: Any) -> Any:
    y = sadl.ops.scaled_dot_product_attention(q, k, v, causal=True)
    (y * g).sum().backward()
    return y


CASES: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "layer norm (4096, 128), fwd + bwd": (_layer_norm, [(4096, 128), (128,), (128,), (4096, 128)]),
    "GELU tanh (4096, 512), fwd + bwd": (_gelu, [(4096, 512), (4096, 512)]),
    "attention (32, 4, 128, 32) causal, fwd + bwd": (_attention, [(32, 4, 128, 32)] * 4),
}


def _traced(make: Callable[[], Callable[[], Any]], kernels: bool) -> Callable[[], Any]:
    """``make()``'s step, traced (its first two calls) with the kernels on or off."""
    os.environ["SADL_KERNELS"] = "1" if kernels else "0"
    try:
        step = make()
        step()
        step()
    finally:
        del os.environ["SADL_KERNELS"]
    return step


def _op_step(fn: Callable[..., Any], arrays: list[Any]) -> Callable[[], Callable[[], Any]]:
    def make() -> Callable[[], Any]:
        compiled = sadl.compile(fn)
        tensors = [sadl.tensor(a, requires_grad=True) for a in arrays]
        return lambda: compiled(*tensors)

    return make


def _adamw_step() -> Callable[[], Any]:
    rng = np.random.default_rng(1)
    params = [sadl.Parameter(rng.standard_normal((512, 512)).astype(np.float32)) for _ in range(3)]
    grads = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(3)]
    opt = sadl.optim.AdamW(params, lr=1e-3)

    def step() -> None:
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()

    return sadl.compile(step)


def main() -> int:
    args = parse_args(__doc__ or "")
    if importlib.util.find_spec("sadl_kernels") is None:
        print("(bench/kernels.py: sadl-kernels is not installed; nothing to compare)")
        return 0
    header("sadl-kernels: compiled step with / without the kernels", args.threads)
    rng = np.random.default_rng(0)
    number, repeat = (2, 2) if args.quick else (5, 7)
    for name, (fn, shapes) in CASES.items():
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        make = _op_step(fn, arrays)
        fast, slow = best_times(
            [_traced(make, True), _traced(make, False)], number=number, repeat=repeat
        )
        row(name, f"{fast * 1e3:.2f} ms", f"{slow * 1e3:.2f} ms", f"{fast / slow:.2f}")
    fast, slow = best_times(
        [_traced(_adamw_step, True), _traced(_adamw_step, False)], number=4 * number, repeat=repeat
    )
    row(
        "AdamW, 786K float32 params",
        f"{fast * 1e3:.2f} ms",
        f"{slow * 1e3:.2f} ms",
        f"{fast / slow:.2f}",
    )
    return 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
