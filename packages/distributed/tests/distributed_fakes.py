"""Stand-ins for tests without MPI: a two-rank group whose ranks always hold the same data."""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl_distributed import ProcessGroup, Work


class MirrorGroup(ProcessGroup):
    """Rank 0 of a world of 2 whose other rank always passes the same arrays as this one.

    So a sum is twice the value, a mean the value itself, and DDP must leave every gradient
    exactly as one process computes it. Every call is recorded in ``calls``.
    """

    backend = "mirror"

    def __init__(self) -> None:
        self.rank, self.size = 0, 2
        self.local_rank, self.local_size = 0, 2
        self.timeout = 5.0
        self.calls: list[tuple[str, Any]] = []

    def all_reduce(self, buffer: Any, op: str) -> Work:
        self.calls.append(("all_reduce", buffer))
        if op == "sum":
            buffer *= 2
        elif op == "prod":
            buffer *= buffer
        return Work(self, None, "all_reduce")

    def broadcast(self, buffer: Any, src: int) -> Work:
        self.calls.append(("broadcast", buffer))
        return Work(self, None, "broadcast")

    def all_gather(self, buffer: Any, out: Any) -> Work:
        self.calls.append(("all_gather", buffer))
        out[...] = buffer
        return Work(self, None, "all_gather")

    def reduce_scatter(self, buffer: Any, out: Any, op: str) -> Work:
        self.calls.append(("reduce_scatter", buffer))
        out[...] = buffer[: len(out)] * (2 if op == "sum" else 1)
        return Work(self, None, "reduce_scatter")

    def barrier(self) -> None:
        self.calls.append(("barrier", None))


def mlp(seed: int = 0, dtype: Any = np.float64) -> Any:
    """A three-layer perceptron made of core Parameters only (no sadl-layers needed)."""
    import sadl

    rng = np.random.default_rng(seed)

    class MLP(sadl.Module):
        def __init__(self) -> None:
            # Defined first, so it lands in the last bucket and holds nothing back.
            self.unused = sadl.Parameter(np.ones(3, dtype=dtype))
            self.w1 = sadl.Parameter(rng.normal(size=(4, 8)).astype(dtype))
            self.b1 = sadl.Parameter(np.zeros(8, dtype=dtype))
            self.w2 = sadl.Parameter(rng.normal(size=(8, 8)).astype(dtype))
            self.w3 = sadl.Parameter(rng.normal(size=(8, 1)).astype(dtype))

        def forward(self, x: Any) -> Any:
            h = (x @ self.w1 + self.b1).tanh()
            return ((h @ self.w2).tanh() @ self.w3).mean()

    return MLP()
