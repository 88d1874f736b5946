"""Training a GPT on a text: the engine behind ``sadl train gpt``.

One :class:`TrainConfig` holds every setting; :func:`train` runs (or resumes) a run in an output
directory holding ``checkpoint.sadl`` (model, AdamW state, schedule, step, random state, and in
its JSON part the model config, the tokenizer, the settings and the loss history) and
``loss.png``. A resumed run continues bit-identically: the same losses as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import numpy as np
import sadl
from sadl.data import windows
from sadl_optim import AdamW, CosineWithWarmup, clip_grad_norm, param_groups_for_weight_decay
from sadl_serialize import atomic_write, load_checkpoint, save_checkpoint

from sadl_models.corpus import (
    CorpusError,
    builtin_corpus,
    read_text,
    split_tokens,
    unigram_cross_entropy,
)
from sadl_models.gpt import GPT
from sadl_models.tokenizers import Tokenizer, make_tokenizer, tokenizer_from_dict

__all__ = [
    "CHECKPOINT_NAME",
    "PLOT_NAME",
    "History",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "build_model",
    "check_device",
    "default_prompt",
    "load_model",
    "sample_text",
    "train",
]

CHECKPOINT_NAME = "checkpoint.sadl"
PLOT_NAME = "loss.png"
FORMAT_TAG = "sadl-models/gpt-train/1"


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
                raise TrainError(f"{_flag(name)} must be a positive integer, got {value!r}")
        for name in ("warmup_steps", "sample_tokens", "seed"):
            value = getattr(self, name)
            if value is None and name == "warmup_steps":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TrainError(f"{_flag(name)} must be an integer >= 0, got {value!r}")
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
        if self.tokenizer not in ("char", "byte"):
            raise TrainError(f"--tokenizer must be 'char' or 'byte', got {self.tokenizer!r}")
        check_device(self.device)

    @property
    def warmup(self) -> int:
        """The warmup length in steps (``warmup_steps``, or min(100, steps // 10) if unset)."""
        return min(100, self.steps // 10) if self.warmup_steps is None else self.warmup_steps

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-serializable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Settings saved by :meth:`to_dict` (unknown keys are an error)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TrainError(f"checkpoint has unknown training settings {unknown}")
        return cls(**dict(data))


def _flag(name: str) -> str:
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
        raise TrainError(f"{_flag(name)} must be a number in {lo}{low}, {high}{hi}, got {value!r}")


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
                "and CuPy: pip install 'sadl-core[gpu]')"
            )
        if (parsed.index or 0) >= count:
            raise TrainError(f"device {device!r} is not available: found {count} CUDA device(s)")
    return str(parsed)


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
class TrainResult:
    """What a run ended with."""

    step: int
    train_loss: float
    val_loss: float
    unigram_loss: float
    history: History
    checkpoint: Path
    plot: Path | None
    sample: str
    interrupted: bool  #: stopped before ``steps`` (Ctrl-C or ``stop_after``)
    seconds: float
    cancelled: bool = False  #: stopped by Ctrl-C (SIGINT)


def _corpus(config: TrainConfig) -> str:
    try:
        return builtin_corpus() if config.text is None else read_text(config.text)
    except CorpusError as exc:
        raise TrainError(f"--text {exc}" if config.text is not None else str(exc)) from None


def _split(
    config: TrainConfig, tokenizer: Tokenizer, text: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    tokens = tokenizer.encode(text)
    train_tokens, val_tokens = split_tokens(tokens, config.val_fraction)
    need = config.block_size + 1
    if len(val_tokens) < need or len(train_tokens) < need:
        where = "the built-in corpus" if config.text is None else config.text
        raise TrainError(
            f"--block-size {config.block_size} is too large for {where}: it has {len(tokens)} "
            f"tokens, {len(val_tokens)} of them held out for validation, and each part needs "
            f"at least block size + 1 = {need}"
        )
    return train_tokens, val_tokens


def build_model(
    config: TrainConfig, vocab_size: int, rng: np.random.Generator | None = None
) -> GPT:
    """The GPT that ``config`` describes, initialized from ``rng`` (default: ``config.seed``)."""
    return GPT(
        vocab_size,
        config.block_size,
        config.n_layer,
        config.n_head,
        config.n_embd,
        config.dropout,
        config.bias,
        rng=np.random.default_rng(config.seed) if rng is None else rng,
    )


def _prepare_out_dir(path: Path) -> None:
    """Create ``--out`` now, so an unusable directory fails before training, not after."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise TrainError(f"--out {path}: exists and is not a directory") from None
    except OSError as exc:
        raise TrainError(f"--out {path}: cannot create it: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise TrainError(f"--out {path}: the directory is not writable")


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TrainError(f"no checkpoint at {path}")
    try:
        meta = load_checkpoint(path)
    except Exception as exc:
        raise TrainError(f"cannot read checkpoint {path}: {exc}") from None
    extra = meta.get("extra") or {}
    if extra.get("format") != FORMAT_TAG:
        raise TrainError(f"{path} is not a checkpoint written by 'sadl train gpt'")
    return meta


def load_model(path: str | os.PathLike[str], device: str | None = None) -> tuple[GPT, Tokenizer]:
    """The GPT and tokenizer stored in a checkpoint written by :func:`train`."""
    ckpt = Path(path)
    extra = _read_meta(ckpt)["extra"]
    tokenizer = tokenizer_from_dict(extra["tokenizer"])
    model = GPT(**extra["model"], rng=0)
    if device is not None:
        model.to(check_device(device))
    load_checkpoint(ckpt, model=model)
    model.eval()
    return model, tokenizer


def _resolve_config(config: TrainConfig, saved: TrainConfig, explicit: set[str]) -> TrainConfig:
    """The saved settings, with the explicitly given ones that a resume may change."""
    changeable = {"steps", "device", "sample_tokens", "eval_interval"}
    for name in sorted(explicit):
        mine, theirs = getattr(config, name), getattr(saved, name)
        if name not in changeable and mine != theirs:
            raise TrainError(
                f"--resume continues the saved run, but {_flag(name)} {mine} differs from its "
                f"{theirs}; drop the option or start a new run in another --out"
            )
    updates = {name: getattr(config, name) for name in explicit if name in changeable}
    return dataclasses.replace(saved, **updates)


class _StopFlag:
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
def _sigint_sets(flag: _StopFlag) -> Iterator[None]:
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, flag)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _progress(total: int, initial: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        disable=not enabled,
        unit="step",
        dynamic_ncols=True,
        file=sys.stderr,
        mininterval=0.5,
    )


@sadl.no_grad()
def _evaluate(model: GPT, batches: list[tuple[Any, Any]]) -> float:
    model.eval()
    try:
        total = 0.0
        for x, y in batches:
            _, loss = model(x, y)
            assert loss is not None
            total += float(loss.item())
        return total / len(batches)
    finally:
        model.train()


def train(
    config: TrainConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    explicit: set[str] | None = None,
    stop_after: int | None = None,
    progress: bool = True,
    stream: TextIO | None = None,
    plot: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train (or with ``resume``, continue) a GPT, checkpointing into ``out_dir``.

    ``explicit`` names the settings the user gave on a resumed run (others come from the
    checkpoint). ``stop_after`` ends this session after that many steps (saving a checkpoint),
    as Ctrl-C does. ``stream`` receives the log lines (default stdout).
    """
    out = stream or sys.stdout
    started = time.perf_counter()
    out_path = Path(out_dir)
    ckpt_path = out_path / CHECKPOINT_NAME
    if stop_after is not None and stop_after <= 0:
        raise TrainError(f"--stop-after must be a positive integer, got {stop_after}")

    meta: dict[str, Any] | None = None
    if resume:
        meta = _read_meta(ckpt_path)
        extra = meta["extra"]
        config = _resolve_config(config, TrainConfig.from_dict(extra["train"]), explicit or set())
    config.validate()
    saved_steps = config.steps
    if meta is not None:
        saved_steps = int(meta["extra"]["train"]["steps"])
    else:
        config = dataclasses.replace(config, warmup_steps=config.warmup)  # saved explicitly
    device = check_device(config.device)
    _prepare_out_dir(out_path)
    text = _corpus(config)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if meta is not None and meta["extra"].get("corpus_sha256") not in (None, digest):
        where = "the built-in corpus" if config.text is None else config.text
        raise TrainError(
            f"--resume: {where} is not the text the checkpoint was trained on (its SHA-256 "
            "differs); resume with the same text or start a new run in another --out"
        )
    tokenizer: Tokenizer
    if meta is not None:
        tokenizer = tokenizer_from_dict(meta["extra"]["tokenizer"])
    else:
        tokenizer = make_tokenizer(config.tokenizer, text)
    try:
        train_tokens, val_tokens = _split(config, tokenizer, text)
    except ValueError as exc:  # a resumed run on a text its tokenizer cannot encode
        raise TrainError(str(exc)) from None
    unigram = unigram_cross_entropy(train_tokens, val_tokens, tokenizer.vocab_size)

    # One generator initializes the model, then drives dropout and batch sampling; its state is
    # saved with every checkpoint, so a resumed run draws exactly the batches it would have.
    rng = np.random.default_rng(config.seed)
    model = build_model(config, tokenizer.vocab_size, rng)
    if device != "cpu":
        model.to(device)
    optimizer = AdamW(
        # Decay matrices (embeddings, linear weights), not biases or LayerNorm parameters.
        param_groups_for_weight_decay(model, config.weight_decay),
        lr=config.lr,
        betas=(config.beta1, config.beta2),
        eps=1e-8,
        weight_decay=config.weight_decay,
    )
    min_lr = config.lr / 10 if config.min_lr is None else config.min_lr
    scheduler = CosineWithWarmup(
        optimizer,
        warmup_steps=config.warmup,
        total_steps=config.steps,
        min_lr=min_lr,
    )
    history = History()
    step = 0
    if meta is not None:
        restored = load_checkpoint(
            ckpt_path, model=model, optimizer=optimizer, scheduler=scheduler, rng=rng
        )
        step = int(restored.get("step") or 0)
        if config.steps < step:
            raise TrainError(
                f"--steps {config.steps} is below the checkpoint's step {step}; pass a larger "
                "--steps to train further"
            )
        if config.steps != saved_steps:  # a longer (or shorter) run: stretch the cosine
            scheduler.total_steps = config.steps
            for group, lr in zip(optimizer.param_groups, scheduler.lr_at(scheduler.last_epoch)):
                group["lr"] = lr
        history = History.from_dict(meta["extra"].get("history", {}))
        history.train = history.train[:step]
        print(f"resuming {ckpt_path} at step {step} of {config.steps}", file=out, flush=True)
    elif ckpt_path.exists():
        print(
            f"note: {ckpt_path} exists and will be replaced (pass --resume to continue it)",
            file=out,
            flush=True,
        )
    # Evaluation batches are drawn once, from their own generator: every evaluation measures
    # the same windows, and evaluating never changes the training run's random stream.
    eval_rng = np.random.default_rng(config.seed + 1)
    val_batches, train_batches = (
        [
            windows(tokens, config.block_size, config.batch_size, rng=eval_rng)
            for _ in range(config.eval_batches)
        ]
        for tokens in (val_tokens, train_tokens)
    )
    if device != "cpu":
        val_batches = [(_to(x, device), _to(y, device)) for x, y in val_batches]
        train_batches = [(_to(x, device), _to(y, device)) for x, y in train_batches]

    n_params = model.num_parameters()
    source = "built-in corpus (pydoc_data.topics)" if config.text is None else config.text
    print(
        f"training GPT: {n_params / 1e6:.2f}M parameters, {config.n_layer} layers, "
        f"{config.n_head} heads, {config.n_embd} dims, block {config.block_size}, "
        f"batch {config.batch_size}, {config.steps} steps on {device}",
        file=out,
    )
    print(
        f"data: {source}, {len(train_tokens) + len(val_tokens):,} tokens "
        f"({tokenizer.kind} tokenizer, vocab {tokenizer.vocab_size}); "
        f"unigram baseline {unigram:.4f} nats/token",
        file=out,
        flush=True,
    )

    def save(at: int) -> None:
        extra = {
            "format": FORMAT_TAG,
            "model": model.config,
            "tokenizer": tokenizer.to_dict(),
            "train": config.to_dict(),
            "history": history.to_dict(),
            "unigram": unigram,
            "corpus_sha256": digest,
        }
        out_path.mkdir(parents=True, exist_ok=True)
        save_checkpoint(
            ckpt_path,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            step=at,
            rng=rng,
            extra=extra,
        )

    flag = _StopFlag(out)
    tokens_per_step = config.batch_size * config.block_size
    session_steps = 0
    interrupted = False
    bar = _progress(config.steps, step, progress)
    window_start = time.perf_counter()
    window_steps = 0
    saved_at = step if meta is not None else None  # the checkpoint on disk holds this step
    with _sigint_sets(flag):  # Ctrl-C only sets a flag from here until the last file is written
        try:
            while step < config.steps:
                if flag.requested or (stop_after is not None and session_steps >= stop_after):
                    interrupted = True
                    break
                x, y = windows(train_tokens, config.block_size, config.batch_size, rng=rng)
                if device != "cpu":
                    x, y = _to(x, device), _to(y, device)
                _, loss = model(x, y)
                assert loss is not None
                optimizer.zero_grad()
                loss.backward()
                clip_grad_norm(model.parameters(), config.grad_clip)
                optimizer.step()
                scheduler.step()
                value = float(loss.item())
                if not math.isfinite(value):
                    raise TrainError(
                        f"the loss became {value} at step {step + 1}; lower --lr and start again"
                    )
                history.train.append(value)
                step += 1
                session_steps += 1
                window_steps += 1
                if on_step is not None:
                    on_step(step, value)
                now = time.perf_counter()
                if now - window_start >= 1.0 or step == config.steps:
                    rate = window_steps * tokens_per_step / (now - window_start)
                    bar.set_postfix_str(f"loss {value:.3f}, {rate:,.0f} tok/s", refresh=False)
                    window_start, window_steps = now, 0
                bar.update(1)
                if step % config.eval_interval == 0 or step == config.steps:
                    evaluation = (
                        step,
                        _evaluate(model, train_batches),
                        _evaluate(model, val_batches),
                    )
                    history.evals.append(evaluation)
                    bar.write(
                        f"step {step}: train loss {evaluation[1]:.4f}, "
                        f"val loss {evaluation[2]:.4f}",
                        file=out,
                    )
                    save(step)
                    saved_at = step
        finally:
            bar.close()
        if saved_at != step:
            save(step)
        plot_path = _plot(history, unigram, out_path / PLOT_NAME) if plot else None

    if history.evals and history.evals[-1][0] == step:
        _, train_loss, val_loss = history.evals[-1]
    elif interrupted:  # leave promptly: the losses are those of the last evaluation, if any
        _, train_loss, val_loss = history.evals[-1] if history.evals else (0, math.nan, math.nan)
    else:
        train_loss, val_loss = _evaluate(model, train_batches), _evaluate(model, val_batches)
    sample = ""
    if interrupted:
        print(
            f"stopped at step {step} of {config.steps}; checkpoint saved to {ckpt_path} "
            "(continue with --resume)",
            file=out,
            flush=True,
        )
    else:
        print(
            f"done: step {step}, train loss {train_loss:.4f}, val loss {val_loss:.4f}, "
            f"unigram baseline {unigram:.4f} nats/token "
            f"({time.perf_counter() - started:.0f} s)",
            file=out,
        )
        print(f"checkpoint: {ckpt_path}", file=out)
        if plot_path is not None:
            print(f"loss curve: {plot_path}", file=out)
        if config.sample_tokens:
            sample = sample_text(model, tokenizer, val_tokens, config.sample_tokens, config.seed)
            print(f"sample:\n{sample}", file=out, flush=True)
    return TrainResult(
        step=step,
        train_loss=train_loss,
        val_loss=val_loss,
        unigram_loss=unigram,
        history=history,
        checkpoint=ckpt_path,
        plot=plot_path,
        sample=sample,
        interrupted=interrupted,
        seconds=time.perf_counter() - started,
        cancelled=flag.requested,
    )


def _to(array: np.ndarray[Any, Any], device: str) -> Any:
    from sadl.backends import to_device

    return to_device(array, device)


def default_prompt(tokenizer: Tokenizer) -> str:
    """``"The "`` when the tokenizer can encode it, else a newline."""
    try:
        tokenizer.encode("The ")
        return "The "
    except ValueError:
        return "\n"


def sample_text(
    model: GPT,
    tokenizer: Tokenizer,
    fallback: np.ndarray[Any, Any],
    n_tokens: int,
    seed: int,
    prompt: str | None = None,
    temperature: float = 0.8,
    top_k: int | None = None,
) -> str:
    """``n_tokens`` generated after ``prompt`` (default ``"The "``), prompt included."""
    text = default_prompt(tokenizer) if prompt is None else prompt
    try:
        ids = tokenizer.encode(text)
    except ValueError:
        ids = fallback[:1]
    if len(ids) == 0:
        ids = fallback[:1]
    out = model.generate(
        ids, n_tokens, temperature=temperature, top_k=top_k, rng=np.random.default_rng(seed)
    )
    return tokenizer.decode(out)


def _plot(history: History, unigram: float, path: Path) -> Path | None:
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
