"""W3-S / W3-M: the ``sadl.compile`` GPT training step against PyTorch eager, in alternating rounds.

``bench/models.py`` times each (framework, config) in its own process (its peak RSS must not
include another's). On a shared, loaded machine that makes a ratio depend on when each process
ran, so this script times sadl compiled, sadl eager and PyTorch eager in ONE process, round by
round in turn (one machine load for all of them), and keeps each one's best round.

With sadl-kernels installed (``nox -s bench`` installs it) a column "sadl compiled + kernels"
is added: the same compiled step with sadl-kernels' fused numba passes, beside "sadl compiled"
traced with ``SADL_KERNELS=0`` (core's passes only, the figure without the plugin).

``--blas`` times the step's matrix products alone through NumPy's BLAS and through PyTorch's
(``bench/blas.py``): how much of the gap to PyTorch is the BLAS each links.

``--profile`` then times every line of the compiled replay and prints where a step spends its
time: by source file of the op that made the call (dense.py, attention.py ...), matmul apart,
and by NumPy function. It reads the generated replay through ``CompiledFunction._last`` (a
diagnostic, not an API).

Usage: python bench/compiled.py [--threads 1] [--quick] [--profile] [--blas]
Run it as ``env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python
bench/compiled.py`` (bench/run.py sets that environment itself).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _torch_step(cfg: dict[str, int], data: list[Any]) -> Any:
    import torch
    from models import _torch_model, _torch_train_step

    batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data]
    return _torch_train_step(_torch_model(cfg), batches)


def profile(compiled: Any, data: list[Any], calls: int) -> None:
    """Time every line of ``compiled``'s replay over ``calls`` calls and print the breakdown."""
    import numpy as np

    program = compiled._last.program  # diagnostic access to the generated replay
    lines = program.source.splitlines()
    body = lines[1:]
    timed = [lines[0], "    _pc = _perf_counter"]
    for j, line in enumerate(body):
        if line.strip().startswith("return"):
            timed.append(line)
            continue
        timed += ["    _t = _pc()", line, f"    _ACC[{j}] += _pc() - _t"]
    namespace = program.namespace
    namespace["_ACC"] = acc = [0.0] * len(body)
    namespace["_perf_counter"] = time.perf_counter
    exec(compile("\n".join(timed) + "\n", "<sadl.compile profiled>", "exec"), namespace)
    original = program.run
    program.run = namespace["replay"]
    try:
        for i in range(calls):
            compiled(*data[i % len(data)])
    finally:
        program.run = original
        namespace["replay"] = original
    nodes = program.line_nodes
    by_file: dict[str, float] = collections.defaultdict(float)
    by_func: dict[str, float] = collections.defaultdict(float)
    for j, seconds in enumerate(acc):
        node = nodes[j] if j < len(nodes) else None
        func = getattr(node, "func", None)
        where = getattr(node, "where", None)
        name = getattr(func, "__name__", node.kind if node is not None else "prologue")
        source = os.path.basename(where[0]) if where else "-"
        by_file[f"{source} ({'matmul' if func is np.matmul else 'other'})"] += seconds / calls
        by_func[name] += seconds / calls
    print(f"  replay: {sum(acc) / calls * 1e3:.1f} ms per step, {len(body)} lines")
    for title, table in (("by source file", by_file), ("by function", by_func)):
        print(f"  {title}:")
        for key, seconds in sorted(table.items(), key=lambda kv: -kv[1])[:12]:
            print(f"    {seconds * 1e3:8.2f} ms  {key}")


def _kernels_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("sadl_kernels") is not None


def _traced(step: Any, kernels: bool) -> Any:
    """``step`` after its first call (the trace, when the passes run) with sadl-kernels' passes
    on or off (``SADL_KERNELS``, read while tracing)."""
    before = os.environ.get("SADL_KERNELS")
    os.environ["SADL_KERNELS"] = "1" if kernels else "0"
    try:
        step()
    finally:
        if before is None:
            del os.environ["SADL_KERNELS"]
        else:
            os.environ["SADL_KERNELS"] = before
    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true", help="per-line replay timing")
    parser.add_argument(
        "--blas", action="store_true", help="the step's products in NumPy's BLAS and torch's"
    )
    parser.add_argument("configs", nargs="*", default=["S", "M"])
    args = parser.parse_args()
    from _common import best_times, optional_torch, set_threads

    set_threads(args.threads)
    if optional_torch() is None:
        print("(bench/compiled.py: PyTorch is not installed; nothing to compare with)")
        return 0
    from models import CONFIGS, _batches, _sadl_train_step

    for name in args.configs:
        cfg = CONFIGS[name]
        data = _batches(cfg, 4)
        compiled_step, compiled = _sadl_train_step(cfg, data, compiled=True)
        steps = {"sadl compiled": _traced(compiled_step, kernels=False)}
        with_kernels = _kernels_installed()
        if with_kernels:
            kernel_step, kernel_compiled = _sadl_train_step(cfg, data, compiled=True)
            steps["sadl compiled + kernels"] = _traced(kernel_step, kernels=True)
        steps["sadl eager"] = _sadl_train_step(cfg, data)[0]
        steps["torch eager"] = _torch_step(cfg, data)
        number = (10 if name == "S" else 3) // (2 if args.quick else 1)
        times = best_times(list(steps.values()), number=number, repeat=2 if args.quick else 7)
        best = dict(zip(steps, times))
        torch_s = best["torch eager"]
        print(
            f"W3-{name} ({args.threads} thread(s), alternating rounds): "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in best.items())
            + f"; compiled/torch {best['sadl compiled'] / torch_s:.3f}"
            + f", eager/torch {best['sadl eager'] / torch_s:.3f}"
            + (
                f", compiled+kernels/torch {best['sadl compiled + kernels'] / torch_s:.3f}"
                f", compiled+kernels/compiled "
                f"{best['sadl compiled + kernels'] / best['sadl compiled']:.3f}"
                if with_kernels
                else " (sadl-kernels not installed)"
            )
        )
        if args.profile:
            profile(compiled, data, 10 if name == "S" else 5)
            if with_kernels:
                print("  with sadl-kernels:")
                profile(kernel_compiled, data, 10 if name == "S" else 5)
        if args.blas:
            from blas import blas_floor

            products = blas_floor(compiled, compiled_step, steps["torch eager"])
            sadl_rest = best["sadl compiled"] - products["sadl 2-D in step"]
            sadl_rest -= products["sadl batched in step"]
            torch_rest = torch_s - products["torch 2-D in step"]
            print(
                f"  the rest of a step: sadl compiled {sadl_rest * 1e3:.1f} ms, torch eager "
                f"{torch_rest * 1e3:.1f} ms (its attention, with its products, included)"
            )
    return 0


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    raise SystemExit(main())
