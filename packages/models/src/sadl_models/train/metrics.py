"""``metrics.jsonl``: one JSON object per training step, beside the loss plot.

Each line holds ``step``, ``loss`` (the batch's), ``lr`` (the learning rate the step used),
``tokens_per_s`` and ``time`` (seconds since the session started); a step that ends with an
evaluation adds ``train_loss`` and ``val_loss``. Lines are flushed as they are written (``tail
-f`` works) and read back with ``pandas.read_json(path, lines=True)`` or ``json.loads`` per
line, so runs can be compared. A resumed run first drops the lines after its checkpoint's step
(that part of the run is redone, identically) and then appends.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import IO, Any

from sadl_serialize import atomic_write

__all__ = ["METRICS_NAME", "MetricsLog", "read_metrics"]

METRICS_NAME = "metrics.jsonl"


class MetricsLog:
    """Appends one line per step to ``path`` (``resume_step``: keep the lines up to it)."""

    def __init__(self, path: Path, resume_step: int | None = None) -> None:
        self.path = path
        kept = b""
        if resume_step is not None and path.exists():
            rows = [r for r in read_metrics(path) if r.get("step", math.inf) <= resume_step]
            kept = "".join(json.dumps(r) + "\n" for r in rows).encode()
        with atomic_write(path) as fh:  # a new run starts an empty file
            fh.write(kept)
        self.file: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        """One line (values that are not finite numbers are written as null)."""
        if self.file is None:
            raise ValueError(f"{self.path}: the metrics log is closed")
        clean = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in record.items()
        }
        self.file.write(json.dumps(clean) + "\n")
        self.file.flush()

    def close(self) -> None:
        """Close the file (further writes raise)."""
        if self.file is not None:
            self.file.close()
            self.file = None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Every record of a ``metrics.jsonl``; a last line cut short (a killed run) is left out."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            rows.append(json.loads(line))
        except ValueError:
            if number == len(lines):
                break
            raise ValueError(f"{path}: line {number} is not JSON") from None
    return rows
