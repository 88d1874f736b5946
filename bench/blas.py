"""The BLAS floor of a compiled step: its matrix products through NumPy's BLAS and PyTorch's.

A compiled GPT step is mostly GEMMs; NumPy hands them to the BLAS it ships with (OpenBLAS in
the PyPI wheels), PyTorch's x86 wheels to MKL / oneDNN. To tell how much of a gap to PyTorch
eager is the framework and how much the BLAS, :func:`blas_floor` records every ``matmul`` one
replayed step makes (its operands copied with their layout, its output a fresh array of the
same layout) and times:

* each product alone, best of a few, through ``np.matmul`` and through ``torch.matmul`` on the
  very same arrays (the BLAS against the BLAS);
* the same products inside the replay (cold caches, as a step sees them), and PyTorch's 2-D
  products inside its own eager step (``aten::mm`` and ``aten::addmm``, whose bias sadl adds in
  a separate call; PyTorch's attention does its products inside one fused kernel).

Used by ``bench/compiled.py --blas``. It reads the replay through ``CompiledFunction._last``
(a diagnostic, not an API), as ``--profile`` does.
"""

from __future__ import annotations

import collections
import time
from typing import Any

_TORCH_2D = ("aten::mm", "aten::addmm")


def _is_2d(a: Any, b: Any) -> bool:
    return bool(a.ndim <= 2 and b.ndim <= 2)


def _record(program: Any, run: Any, calls: int) -> tuple[list[tuple[Any, ...]], dict[str, float]]:
    """The matmul calls of one replay (operand copies, output) and their in-replay seconds.

    Seconds per step are split into 2-D products (dense layers) and batched ones (attention).
    """
    import numpy as np
    from sadl.backends import matmul

    namespace = program.namespace
    products = {k: v for k, v in namespace.items() if v is np.matmul or v is matmul}
    names = list(products)
    captured: list[tuple[Any, ...]] = []
    spent = {"2-D": 0.0, "batched": 0.0}
    recording = [True]  # every product of the first call is recorded, then only timed

    def timed(a: Any, b: Any, out: Any = None) -> Any:
        start = time.perf_counter()
        result = matmul(a, b, out=out)
        spent["2-D" if _is_2d(a, b) else "batched"] += time.perf_counter() - start
        if recording[0]:
            target = result[0] if isinstance(result, tuple) else result
            captured.append((np.array(a, order="K"), np.array(b, order="K"), np.empty_like(target)))
        return result

    for name in names:
        namespace[name] = timed
    try:
        run()
        recording[0] = False
        spent.update(dict.fromkeys(spent, 0.0))
        for _ in range(calls):
            run()
    finally:
        namespace.update(products)
    return captured, {k: v / calls for k, v in spent.items()}


def _best(fn: Any, repeat: int) -> float:
    """Best seconds of one call, one warm-up first.

    Not ``_common.best_time``: its ``gc.collect()`` before every round walks the heap and leaves
    a single small product to run from cold caches (W3-S's products then measure 3-6x slower).
    """
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def torch_products_in_step(torch_step: Any, calls: int = 3) -> float:
    """Seconds per step PyTorch's eager step spends in its 2-D products (its own profiler)."""
    from torch.profiler import ProfilerActivity, profile

    torch_step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            torch_step()
    micros = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in _TORCH_2D)
    return micros / 1e6 / calls


def blas_floor(compiled: Any, run: Any, torch_step: Any, calls: int = 3) -> dict[str, float]:
    """Seconds per step of the step's products, in and out of each framework's step.

    ``run`` makes one compiled call, ``torch_step`` one PyTorch eager step. Prints the ten
    costliest product shapes and the totals; returns the totals.
    """
    import numpy as np
    import torch

    captured, in_replay = _record(compiled._last.program, run, calls)
    rows: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    alone = {"numpy 2-D": 0.0, "torch 2-D": 0.0, "numpy batched": 0.0, "torch batched": 0.0}
    for a, b, out in captured:
        ta, tb, tout = (torch.from_numpy(x) for x in (a, b, out))
        # torch's matmul of a vector resizes an out= (deprecated): it gets none there
        to = tout if a.ndim > 1 and b.ndim > 1 else None
        numpy_s = _best(lambda a=a, b=b, out=out: np.matmul(a, b, out=out), 5)
        torch_s = _best(lambda ta=ta, tb=tb, to=to: torch.matmul(ta, tb, out=to), 5)
        kind = "2-D" if _is_2d(a, b) else "batched"
        alone[f"numpy {kind}"] += numpy_s
        alone[f"torch {kind}"] += torch_s
        layout = "".join(
            "C" if x.flags.c_contiguous else "F" if x.flags.f_contiguous else "s" for x in (a, b)
        )
        row = rows[f"{a.shape} @ {b.shape} [{layout}]"]
        row[0] += 1
        row[1] += numpy_s
        row[2] += torch_s
    print(f"  products of one step: {len(captured)} matmul calls; alone, best of 5:")
    for key, (n, numpy_s, torch_s) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:10]:
        print(
            f"    {numpy_s * 1e3:7.2f} ms numpy, {torch_s * 1e3:7.2f} ms torch "
            f"({numpy_s / torch_s:.2f}x)  x{n} {key}"
        )
    totals = {
        **{k: v for k, v in alone.items()},
        "sadl 2-D in step": in_replay["2-D"],
        "sadl batched in step": in_replay["batched"],
        "torch 2-D in step": torch_products_in_step(torch_step, calls),
    }
    for kind in ("2-D", "batched"):
        print(
            f"  {kind} products alone: numpy {totals[f'numpy {kind}'] * 1e3:.1f} ms, torch "
            f"{totals[f'torch {kind}'] * 1e3:.1f} ms "
            f"({totals[f'numpy {kind}'] / totals[f'torch {kind}']:.3f}x)"
        )
    print(
        f"  in the step: sadl 2-D {in_replay['2-D'] * 1e3:.1f} ms + batched "
        f"{in_replay['batched'] * 1e3:.1f} ms; torch 2-D (mm, addmm with its bias) "
        f"{totals['torch 2-D in step'] * 1e3:.1f} ms"
    )
    return totals
