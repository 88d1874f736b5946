"""The checkpoint of a training run: what it holds, writing it, resuming from it, loading a model.

``checkpoint.sadl`` holds the model, the AdamW state, the schedule, the step and the random state
(through sadl-serialize), and in its JSON part the model config, the tokenizer, the settings, the
loss history, the unigram baseline and the corpus digest, so a resumed run continues
bit-identically and ``sadl generate`` needs nothing else.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from sadl.optim import Optimizer
from sadl_optim import CosineWithWarmup
from sadl_serialize import load_checkpoint, save_checkpoint

from sadl_models.gpt import GPT
from sadl_models.tokenizers import Tokenizer, TokenizerError, tokenizer_from_dict
from sadl_models.train.budget import check_fits_in_memory, check_model_config, estimate_bytes
from sadl_models.train.config import TrainConfig, TrainError, check_device, flag

__all__ = [
    "CHECKPOINT_NAME",
    "FORMAT_TAG",
    "History",
    "RunState",
    "check_run_dir",
    "load_model",
    "prepare_out_dir",
    "read_meta",
    "restore",
    "resume_config",
    "save_run",
]

CHECKPOINT_NAME = "checkpoint.sadl"
FORMAT_TAG = "sadl-models/gpt-train/1"
#: The settings a resumed run may change; any other must match the checkpoint's.
RESUMABLE_CHANGES = frozenset(
    {"steps", "device", "sample_tokens", "eval_interval", "checkpoint_activations"}
)


@dataclass
class History:
    """Loss history (saved in the checkpoint).

    ``train``: the loss of every step's batch. ``evals``: ``(step, train, val)`` at each
    evaluation, both measured the same way (eval mode, the same fixed batches every time).
    """

    train: list[float] = field(default_factory=list)
    evals: list[tuple[int, float, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"train": list(self.train), "evals": [list(e) for e in self.evals]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> History:
        """Inverse of :meth:`to_dict`."""
        return cls(
            [float(x) for x in data.get("train", [])],
            [(int(s), float(t), float(v)) for s, t, v in data.get("evals", [])],
        )


@dataclass
class RunState:
    """What a checkpoint saves and restores besides the metadata: the objects of a run."""

    model: GPT
    optimizer: Optimizer
    scheduler: CosineWithWarmup
    rng: np.random.Generator


def check_run_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse a run that would replace or misread the run in ``--out`` (nothing is created)."""
    if resume and overwrite:
        raise TrainError("--resume continues the run in --out, --overwrite replaces it: pass one")
    if out.exists() and not out.is_dir():
        raise TrainError(f"--out {out}: exists and is not a directory")
    if not resume and not overwrite and (out / CHECKPOINT_NAME).exists():
        raise TrainError(
            f"--out {out} holds a checkpoint ({out / CHECKPOINT_NAME}); pass --resume to "
            "continue it or --overwrite to replace it"
        )


def prepare_out_dir(path: Path) -> None:
    """Create ``--out`` now, so an unusable directory fails before training, not after."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise TrainError(f"--out {path}: exists and is not a directory") from None
    except OSError as exc:
        raise TrainError(f"--out {path}: cannot create it: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise TrainError(f"--out {path}: the directory is not writable")


def read_meta(path: Path) -> dict[str, Any]:
    """The checkpoint's metadata; a TrainError unless ``sadl train gpt`` wrote it.

    Only the metadata is trusted after this: its model config, tokenizer and settings have the
    right kinds (each is checked further where it is used, before anything is built).
    """
    if not path.is_file():
        raise TrainError(f"no checkpoint at {path}")
    try:
        meta = load_checkpoint(path)
    except Exception as exc:
        raise TrainError(f"cannot read checkpoint {path}: {exc}") from None
    extra = meta.get("extra")
    if not isinstance(extra, Mapping) or extra.get("format") != FORMAT_TAG:
        raise TrainError(f"{path} is not a checkpoint written by 'sadl train gpt'")
    for key in ("model", "tokenizer", "train"):
        if not isinstance(extra.get(key), Mapping):
            raise TrainError(f"{path}: damaged checkpoint: its {key!r} entry is not a mapping")
    if not isinstance(extra.get("history", {}), Mapping):
        raise TrainError(f"{path}: damaged checkpoint: its 'history' entry is not a mapping")
    return meta


def load_model(path: str | os.PathLike[str], device: str | None = None) -> tuple[GPT, Tokenizer]:
    """The GPT and tokenizer stored in a checkpoint written by :func:`train`.

    The stored config is checked (types, ranges, and a memory estimate against this machine's
    memory) before the model is built; a damaged or hostile checkpoint is a TrainError.
    """
    ckpt = Path(path)
    extra = read_meta(ckpt)["extra"]
    config = check_model_config(extra["model"], str(ckpt))
    check_fits_in_memory(
        estimate_bytes(config, batch=1, training=False),
        f"the model in {ckpt}",
        "it was not loaded",
    )
    tokenizer = _saved_tokenizer(extra, ckpt)
    if tokenizer.vocab_size != config["vocab_size"]:
        raise TrainError(
            f"{ckpt}: damaged checkpoint: its tokenizer has {tokenizer.vocab_size} tokens, its "
            f"model {config['vocab_size']}"
        )
    if device is not None:
        device = check_device(device)
    model = GPT(**config, rng=0)
    if device is not None:
        model.to(device)
    try:
        load_checkpoint(ckpt, model=model)
    except (KeyError, TypeError, ValueError) as exc:
        raise TrainError(f"{ckpt}: damaged checkpoint: {_reason(exc)}") from None
    model.eval()
    return model, tokenizer


def _saved_tokenizer(extra: Mapping[str, Any], path: Path) -> Tokenizer:
    try:
        return tokenizer_from_dict(extra["tokenizer"])
    except TokenizerError as exc:
        raise TrainError(f"{path}: damaged checkpoint: {exc}") from None


def _reason(exc: BaseException) -> str:
    """An exception's message (a KeyError's without the quotes repr adds)."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def resume_config(config: TrainConfig, meta: Mapping[str, Any], explicit: set[str]) -> TrainConfig:
    """The checkpoint's settings, with the explicitly given ones that a resume may change."""
    saved = TrainConfig.from_dict(meta["extra"]["train"])  # validated by train() once merged
    for name in sorted(explicit):
        mine, theirs = getattr(config, name), getattr(saved, name)
        if name == "text" and _same_text(mine, theirs, meta):
            continue
        if name not in RESUMABLE_CHANGES and mine != theirs:
            raise TrainError(
                f"--resume continues the saved run, but {flag(name)} {mine} differs from its "
                f"{theirs}; drop the option or start a new run in another --out"
            )
    changes = RESUMABLE_CHANGES | {"text"}
    updates = {name: getattr(config, name) for name in explicit if name in changes}
    return dataclasses.replace(saved, **updates)


def _same_text(mine: str | None, theirs: str | None, meta: Mapping[str, Any]) -> bool:
    """Whether ``--text`` names the run's text: the same file (``./a.txt``, ``a.txt`` and its
    absolute path alike), or a file whose content the caller checks against the checkpoint's
    SHA-256 (a moved copy; the train loop refuses other content).
    """
    if mine is None or theirs is None:
        return mine == theirs
    if os.path.realpath(mine) == os.path.realpath(theirs):
        return True
    return isinstance(meta["extra"].get("corpus_sha256"), str)


def save_run(
    path: Path,
    step: int,
    state: RunState,
    extra: dict[str, Any],
    writer: Callable[..., None] = save_checkpoint,
) -> None:
    """Write the checkpoint of a run at ``step`` (atomically: the previous one survives a crash).

    ``writer`` is sadl-serialize's ``save_checkpoint``, or its data-parallel counterpart.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    writer(
        path,
        model=state.model,
        optimizer=state.optimizer,
        scheduler=state.scheduler,
        step=step,
        rng=state.rng,
        extra={"format": FORMAT_TAG, **extra},
    )


def restore(
    path: Path, meta: Mapping[str, Any], config: TrainConfig, state: RunState, out: TextIO
) -> tuple[int, History]:
    """Load a run's state from its checkpoint into ``state``: its step and history.

    A resume with a different ``--steps`` stretches (or shrinks) the cosine schedule to it.
    """
    scheduler, optimizer = state.scheduler, state.optimizer
    try:
        restored = load_checkpoint(
            path, model=state.model, optimizer=optimizer, scheduler=scheduler, rng=state.rng
        )
        history = History.from_dict(meta["extra"].get("history", {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise TrainError(f"--resume: {path}: damaged checkpoint: {_reason(exc)}") from None
    step = int(restored.get("step") or 0)
    if config.steps < step:
        raise TrainError(
            f"--steps {config.steps} is below the checkpoint's step {step}; pass a larger "
            "--steps to train further"
        )
    if config.steps != int(meta["extra"]["train"]["steps"]):
        scheduler.total_steps = config.steps
        for group, lr in zip(optimizer.param_groups, scheduler.lr_at(scheduler.last_epoch)):
            group["lr"] = lr
    history.train = history.train[:step]
    print(f"resuming {path} at step {step} of {config.steps}", file=out, flush=True)
    return step, history
