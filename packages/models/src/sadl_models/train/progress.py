"""What a training run shows while it runs: the progress, Ctrl-C, the loss plot.

Log lines go to a stream (stdout by default). On a terminal the progress is a bar on stderr;
written to a file or a pipe it is a plain line every twentieth of the run, never hundreds of
bar redraws. Ctrl-C (SIGINT) only sets a flag that the loop checks between steps, so a run
stops with a checkpoint; a second Ctrl-C aborts at once.
"""

from __future__ import annotations

import io
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TextIO

import numpy as np
from sadl_serialize import atomic_write

from sadl_models.train.checkpoint import History

__all__ = ["PLOT_NAME", "ProgressBar", "StopFlag", "plot_losses", "stop_on_sigint"]

PLOT_NAME = "loss.png"


class StopFlag:
    """SIGINT sets a flag the loop checks between steps; a second SIGINT aborts at once."""

    def __init__(self, stream: TextIO) -> None:
        self.requested = False
        self.stream = stream

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(
            "\ninterrupt: finishing this step and saving a checkpoint (Ctrl-C again to abort "
            "without saving)",
            file=self.stream,
            flush=True,
        )


@contextmanager
def stop_on_sigint(flag: StopFlag) -> Iterator[None]:
    """Within the block, SIGINT calls ``flag`` (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, flag)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class ProgressBar:
    """Progress over the steps: a tqdm bar on a terminal, plain periodic lines elsewhere.

    ``enabled``: True for the bar, False for nothing, None to choose by whether stderr is a
    terminal (the bar there, a line every ``total // 20`` steps into ``stream`` otherwise).
    """

    def __init__(
        self,
        total: int,
        initial: int,
        enabled: bool | None,
        tokens_per_step: int,
        stream: TextIO | None = None,
    ) -> None:
        from tqdm import tqdm

        self.live = sys.stderr.isatty() if enabled is None else enabled
        self.lines = enabled is None and not self.live
        self.bar = tqdm(
            total=total,
            initial=initial,
            disable=not self.live,
            unit="step",
            dynamic_ncols=True,
            file=sys.stderr,
            mininterval=0.5,
        )
        self.total = total
        self.every = max(1, total // 20)
        self.stream = stream or sys.stdout
        self.tokens_per_step = tokens_per_step
        self.window_start = time.perf_counter()
        self.window_steps = 0

    def step(self, step: int, loss: float, lr: float | None = None) -> None:
        """One step done (``step`` counts from 1) with this batch loss (and learning rate)."""
        self.window_steps += 1
        now = time.perf_counter()
        if self.live:
            if now - self.window_start >= 1.0 or step == self.total:
                rate = self.window_steps * self.tokens_per_step / (now - self.window_start)
                self.bar.set_postfix_str(f"loss {loss:.3f}, {rate:,.0f} tok/s", refresh=False)
                self.window_start, self.window_steps = now, 0
            self.bar.update(1)
        elif self.lines and (step % self.every == 0 or step == self.total):
            rate = self.window_steps * self.tokens_per_step / max(now - self.window_start, 1e-9)
            lr_text = "" if lr is None else f", lr {lr:.2e}"
            print(
                f"step {step}/{self.total}: loss {loss:.4f}{lr_text}, {rate:,.0f} tok/s",
                file=self.stream,
                flush=True,
            )
            self.window_start, self.window_steps = now, 0

    def write(self, line: str, stream: TextIO) -> None:
        """Print a log line without tearing the bar."""
        if self.live:
            self.bar.write(line, file=stream)
        else:
            print(line, file=stream, flush=True)

    def close(self) -> None:
        """Remove the bar."""
        self.bar.close()


def plot_losses(history: History, unigram: float, path: Path) -> Path | None:
    """The loss curve as a PNG (atomic write); None when there is nothing to draw."""
    if not history.train:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    steps = np.arange(1, len(history.train) + 1)
    losses = np.asarray(history.train)
    ax.plot(steps, losses, color="#9ab", linewidth=0.6, label="train (per step)")
    if len(losses) >= 20:
        k = max(5, len(losses) // 50)
        smooth = np.convolve(losses, np.ones(k) / k, mode="valid")
        ax.plot(steps[k - 1 :], smooth, color="#157", linewidth=1.4, label=f"train ({k}-step mean)")
    if history.evals:
        es, et, ev = zip(*history.evals)
        ax.plot(es, et, "s-", color="#393", markersize=3, label="train (eval batches)")
        ax.plot(es, ev, "o-", color="#d62", markersize=3, label="validation")
    ax.axhline(unigram, color="#888", linestyle="--", linewidth=1, label="unigram baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(buffer.getvalue())
    return path
