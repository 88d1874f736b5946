"""MKL against NumPy's OpenBLAS on W3-M's products, in one process, alternating.

Decides whether an MKL GEMM backend would pay on this CPU: Intel's ``mkl`` wheel (PyPI; about
1 GB installed) brings ``libmkl_rt``, whose ``cblas_sgemm`` and ``cblas_sgemm_batch_strided``
are called here through ctypes on NumPy's own buffers, against ``np.matmul`` (OpenBLAS) on the
same arrays and output. Both libraries run at ``--threads`` threads (threadpoolctl for
OpenBLAS, ``MKL_Set_Num_Threads`` for MKL); the rounds alternate and the best of each counts,
so on a shared machine both sides see the same load. The shapes: W3-M's dense layers
((128 tokens x 32, 4096) ... as bench/blas.py lists them) and its attention products, batched.

Reports MKL's time over OpenBLAS's per shape (below 1: MKL faster) and whether MKL's product
matches NumPy's (relative error). Without the ``mkl`` wheel it says so and exits 0.

Usage: python bench/mkl.py [--threads 1] [--rounds 15]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (a's shape, b's shape): W3-M's costliest products (bench/compiled.py --blas) and attention.
SHAPES = [
    ((128, 4096), (4096, 512)),
    ((4096, 128), (128, 128)),
    ((4096, 128), (128, 512)),
    ((4096, 512), (512, 128)),
    ((128, 128, 32), (128, 32, 128)),  # batch x heads, block, head dims: q @ k^T
    ((128, 128, 128), (128, 128, 32)),  # attention @ v
]
ROW_MAJOR, NO_TRANS = 101, 111


def mkl_library() -> Any:
    """``libmkl_rt`` from the installed ``mkl`` wheel, or None."""
    try:
        files = importlib.metadata.distribution("mkl").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name.startswith("libmkl_rt.so") or f.name in ("libmkl_rt.dylib", "mkl_rt.2.dll"):
            lib = ctypes.CDLL(str(f.locate()))
            i, p, s = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
            lib.cblas_sgemm.argtypes = [i, i, i, i, i, i, s, p, i, p, i, s, p, i]
            lib.cblas_sgemm_batch_strided.argtypes = [
                *(i, i, i, i, i, i, s), *(p, i, i), *(p, i, i), s, *(p, i, i), i
            ]  # fmt: skip
            return lib
    return None


def mkl_product(lib: Any, a: Any, b: Any, out: Any) -> Any:
    """A call writing ``a @ b`` into ``out`` through MKL (C-contiguous float32 operands)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    pa, pb, po = a.ctypes.data, b.ctypes.data, out.ctypes.data
    if a.ndim == 2:
        return lambda: lib.cblas_sgemm(
            ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, pa, k, pb, n, 0.0, po, n
        )
    return lambda: lib.cblas_sgemm_batch_strided(
        *(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0), *(pa, k, m * k), *(pb, n, k * n),
        *(0.0, po, n, m * n), a.shape[0],
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="3 rounds (a smoke test)")
    args = parser.parse_args()
    import numpy as np
    from threadpoolctl import threadpool_limits

    lib = mkl_library()
    if lib is None:
        print("(the mkl wheel is not installed: pip install mkl, then run this again)")
        return 0
    lib.MKL_Set_Num_Threads(args.threads)
    rng = np.random.default_rng(0)
    rounds = 3 if args.quick else args.rounds
    print(f"\n### float32 products at {args.threads} thread(s), best of {rounds} alternating\n")
    print("| a @ b | OpenBLAS | MKL | MKL / OpenBLAS | MKL's relative error |")
    print("|---|---|---|---|---|", flush=True)
    total = {"openblas": 0.0, "mkl": 0.0}
    for sa, sb in SHAPES:
        a, b = rng.standard_normal(sa, dtype=np.float32), rng.standard_normal(sb, dtype=np.float32)
        out = np.empty(np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]), np.float32)
        mkl = mkl_product(lib, a, b, out)
        mkl()
        err = float(np.abs(out - np.matmul(a, b)).max() / np.abs(out).max())
        number = max(1, int(2e8 // (np.prod(sa) * sb[-1])))
        best = {"openblas": float("inf"), "mkl": float("inf")}
        calls = {"openblas": lambda a=a, b=b, o=out: np.matmul(a, b, out=o), "mkl": mkl}
        with threadpool_limits(args.threads, user_api="blas"):
            for _ in range(rounds):
                for name, call in calls.items():
                    start = time.perf_counter()
                    for _ in range(number):
                        call()
                    best[name] = min(best[name], (time.perf_counter() - start) / number)
        for name in total:
            total[name] += best[name]
        print(
            f"| {sa} @ {sb} | {best['openblas'] * 1e3:.3f} ms | {best['mkl'] * 1e3:.3f} ms "
            f"| {best['mkl'] / best['openblas']:.2f} | {err:.1e} |",
            flush=True,
        )
    ratio = total["mkl"] / total["openblas"]
    print(
        f"\n- all shapes: MKL / OpenBLAS {ratio:.2f} ({'MKL pays' if ratio < 1 else 'it does not'})"
    )
    return 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
