"""Training a GPT on a text: the engine behind ``sadl train gpt``.

One :class:`TrainConfig` holds every setting; :func:`train` runs (or resumes) a run in an output
directory holding ``checkpoint.sadl``, ``loss.png`` and ``metrics.jsonl``. A resumed run
continues bit-identically: the same losses as an uninterrupted run. One file per job:

* :mod:`~sadl_models.train.config`: the settings and their validation;
* :mod:`~sadl_models.train.loop`: the training loop (set-up, steps, evaluation, the sample);
* :mod:`~sadl_models.train.checkpoint`: what a checkpoint holds, resuming, :func:`load_model`;
* :mod:`~sadl_models.train.progress`: the progress bar (or lines), Ctrl-C, the loss plot;
* :mod:`~sadl_models.train.metrics`: ``metrics.jsonl``, one line per step;
* :mod:`~sadl_models.train.parallel`: one process, or N (``--nproc``, ``mpiexec``).
"""

from __future__ import annotations

from sadl_models.train.checkpoint import CHECKPOINT_NAME, History, load_model
from sadl_models.train.config import TrainConfig, TrainError, check_device
from sadl_models.train.loop import TrainResult, build_model, default_prompt, sample_text, train
from sadl_models.train.metrics import METRICS_NAME, read_metrics
from sadl_models.train.progress import PLOT_NAME

__all__ = [
    "CHECKPOINT_NAME",
    "METRICS_NAME",
    "PLOT_NAME",
    "History",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "build_model",
    "check_device",
    "default_prompt",
    "load_model",
    "read_metrics",
    "sample_text",
    "train",
]
