"""The settings of a training run and their validation.

Every check raises :class:`TrainError` with one line that names the command-line flag, so
``sadl train gpt`` can print it as is.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sadl

__all__ = ["TrainConfig", "TrainError", "check_device", "flag", "read_config_file"]


class TrainError(ValueError):
    """A setting or a file that makes training impossible (the message is one line)."""


@dataclass
class TrainConfig:
    """Every setting of a training run (the defaults train the demo in about two minutes)."""

    text: str | None = None  #: UTF-8 file to train on; None: the built-in corpus
    tokenizer: str = "char"  #: "char" or "byte"
    steps: int = 1300
    batch_size: int = 32
    block_size: int = 64
    n_layer: int = 3
    n_head: int = 4
    n_embd: int = 96
    dropout: float = 0.0
    bias: bool = True
    lr: float = 3e-3
    min_lr: float | None = None  #: None: lr / 10
    warmup_steps: int | None = None  #: None: min(100, steps // 10)
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    val_fraction: float = 0.1
    eval_interval: int = 250
    eval_batches: int = 8
    sample_tokens: int = 300
    seed: int = 1337
    device: str = "cpu"
    checkpoint_activations: bool = False  #: recompute each block in backward (less memory)

    def validate(self) -> None:
        """Raise :class:`TrainError` naming the first setting that is out of range."""
        positive = (
            "steps",
            "batch_size",
            "block_size",
            "n_layer",
            "n_head",
            "n_embd",
            "eval_interval",
            "eval_batches",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainError(f"{flag(name)} must be a positive integer, got {value!r}")
        for name in ("warmup_steps", "sample_tokens", "seed"):
            value = getattr(self, name)
            if value is None and name == "warmup_steps":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TrainError(f"{flag(name)} must be an integer >= 0, got {value!r}")
        if self.warmup_steps is not None and self.warmup_steps >= self.steps:
            raise TrainError(
                f"--warmup-steps {self.warmup_steps} must be less than --steps {self.steps}"
            )
        if self.n_embd % self.n_head:
            raise TrainError(f"--n-embd {self.n_embd} must be divisible by --n-head {self.n_head}")
        _finite_in("lr", self.lr, 0.0, math.inf, low_open=True)
        if self.min_lr is not None:
            _finite_in("min_lr", self.min_lr, 0.0, self.lr)
        _finite_in("weight_decay", self.weight_decay, 0.0, math.inf)
        _finite_in("grad_clip", self.grad_clip, 0.0, math.inf, low_open=True)
        _finite_in("dropout", self.dropout, 0.0, 1.0, high_open=True)
        _finite_in("beta1", self.beta1, 0.0, 1.0, high_open=True)
        _finite_in("beta2", self.beta2, 0.0, 1.0, high_open=True)
        _finite_in("val_fraction", self.val_fraction, 0.0, 0.5, low_open=True)
        if not isinstance(self.checkpoint_activations, bool):
            raise TrainError(
                f"{flag('checkpoint_activations')} must be a boolean, got "
                f"{self.checkpoint_activations!r}"
            )
        if self.tokenizer not in ("char", "byte"):
            raise TrainError(f"--tokenizer must be 'char' or 'byte', got {self.tokenizer!r}")
        if self.text is not None and not isinstance(self.text, str):
            raise TrainError(f"--text must be a file name, got {self.text!r}")
        if not isinstance(self.bias, bool):
            raise TrainError(f"bias must be true or false, got {self.bias!r}")
        if not isinstance(self.device, str):
            raise TrainError(f"--device must be a string such as 'cpu', got {self.device!r}")
        check_device(self.device)

    @property
    def warmup(self) -> int:
        """The warmup length in steps (``warmup_steps``, or min(100, steps // 10) if unset)."""
        return min(100, self.steps // 10) if self.warmup_steps is None else self.warmup_steps

    @property
    def final_lr(self) -> float:
        """The learning rate the cosine ends at (``min_lr``, or ``lr / 10`` if unset)."""
        return self.lr / 10 if self.min_lr is None else self.min_lr

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-serializable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Settings saved by :meth:`to_dict` (unknown keys are an error)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names, key=str)
        if unknown:
            raise TrainError(f"checkpoint has unknown training settings {unknown}")
        return cls(**dict(data))


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings of a TOML file for ``sadl train gpt --config FILE``.

    Its keys are :class:`TrainConfig`'s fields (``block_size = 64``: a flag's name without its
    dashes, ``-`` or ``_`` alike); the flags given beside ``--config`` take precedence. The
    values are checked by :meth:`TrainConfig.validate` like the flags' are; an unknown key, a
    table or a file that is not TOML is a TrainError naming the file.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise TrainError(f"--config {p}: no such file") from None
    except OSError as exc:
        raise TrainError(f"--config {p}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TrainError(f"--config {p}: not TOML: {exc}") from None
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    settings = {key.replace("-", "_"): value for key, value in data.items()}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise TrainError(
            f"--config {p}: unknown setting {unknown[0]!r}; the settings are "
            + ", ".join(sorted(names))
        )
    for key, value in settings.items():
        if isinstance(value, dict | list):
            raise TrainError(f"--config {p}: {key} must be a number, a string or a boolean")
    return settings


def flag(name: str) -> str:
    """The command-line flag of a setting: ``block_size`` -> ``--block-size``."""
    return "--" + name.replace("_", "-")


def _finite_in(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (
            value < high if high_open else value <= high
        )
    if not ok:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise TrainError(f"{flag(name)} must be a number in {lo}{low}, {high}{hi}, got {value!r}")


def check_device(device: str) -> str:
    """``device`` normalized (``cpu``, ``cuda:N``), or a TrainError saying why it is unusable."""
    try:
        parsed = sadl.device(device)
    except (TypeError, ValueError):
        raise TrainError(f"unknown device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'") from None
    if parsed.type == "cuda":
        count = sadl.cuda.device_count()
        if count == 0:
            raise TrainError(
                f"device {device!r} is not available: no CUDA device found (it needs a GPU "
                f"and CuPy: {sadl.plugins.install_command('sadl-core', extra='gpu')})"
            )
        if (parsed.index or 0) >= count:
            raise TrainError(f"device {device!r} is not available: found {count} CUDA device(s)")
    return str(parsed)
