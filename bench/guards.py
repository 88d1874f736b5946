"""The cost of ``sadl.compile``'s guards per replay (docs/compile.md, "The rule").

Compiles a small training step (the MLP of core's compile tests, SGD, ``zero_grad()`` first, a
model read through a closure), then times its whole replay and, alone, the guard lines of the
replay (the checks a replay makes before it runs), alternating, and prints the best of each. It
reads the replay through ``CompiledFunction._last`` (a diagnostic, not an API).

Usage: ``env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python bench/guards.py``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import sadl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "compile" / "tests"))
from compile_models import MLP, batches, cross_entropy

GUARD_KEYS = (
    "name_guards",
    "data_guards",
    "grad_guards",
    "training_guards",
    "requires_grad_guards",
)


def main() -> None:
    model = MLP()
    opt = sadl.SGD(model.parameters(), lr=0.05)

    def step(x, y):
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    compiled = sadl.compile(step, fusion=False)
    data = batches(3)
    for x, y in data:
        compiled(sadl.tensor(x), sadl.tensor(y))
    entry = compiled._last
    program = entry.program
    checks = [line.strip() for line in program.source.splitlines() if "raise Stale" in line]
    source = "def guards(A, T):\n" + "".join(f"    {line}\n" for line in checks)
    namespace = dict(program.namespace)
    exec(compile(source, "<guards>", "exec"), namespace)
    guards = namespace["guards"]
    x, y = sadl.tensor(data[0][0]), sadl.tensor(data[0][1])
    arrays, tensors = [x.data, y.data], [x, y]
    best = {"replay": np.inf, "guards": np.inf}
    for _ in range(20):
        for name, run in (("replay", program.run), ("guards", guards)):
            start = time.perf_counter()
            for _ in range(500):
                run(arrays, tensors)
            best[name] = min(best[name], (time.perf_counter() - start) / 500)
    cost = best["guards"]
    print(
        f"{len(checks)} guard lines: {cost * 1e6:.2f} us per replay of "
        f"{best['replay'] * 1e6:.1f} us ({cost / best['replay']:.1%}), "
        f"{cost / max(len(checks), 1) * 1e9:.0f} ns per guard"
    )


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
