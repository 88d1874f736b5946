"""The training loop behind ``sadl train gpt``: set up data, model and optimizer, then step.

:func:`train` runs (or resumes) a run in an output directory holding ``checkpoint.sadl`` (see
:mod:`sadl_models.train.checkpoint`), ``loss.png`` and ``metrics.jsonl`` (one line per step,
:mod:`sadl_models.train.metrics`). One random generator initializes the
model, then drives dropout and batch sampling, and its state is saved with every checkpoint: a
resumed run continues bit-identically, with the same losses as an uninterrupted run. Started
by an MPI launcher, every process runs this loop on its share of each batch
(:mod:`sadl_models.train.parallel`); rank 0 logs and writes the files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import sadl
from sadl.data import windows
from sadl_optim import AdamW, CosineWithWarmup, clip_grad_norm, param_groups_for_weight_decay

from sadl_models.corpus import (
    CorpusError,
    builtin_corpus,
    read_text,
    split_tokens,
    unigram_cross_entropy,
)
from sadl_models.gpt import GPT
from sadl_models.tokenizers import Tokenizer, make_tokenizer, tokenizer_from_dict
from sadl_models.train.budget import check_fits_in_memory, estimate_bytes, format_bytes
from sadl_models.train.checkpoint import (
    CHECKPOINT_NAME,
    History,
    RunState,
    check_run_dir,
    prepare_out_dir,
    read_meta,
    restore,
    resume_config,
    save_run,
)
from sadl_models.train.config import TrainConfig, TrainError, check_device
from sadl_models.train.metrics import METRICS_NAME, MetricsLog
from sadl_models.train.parallel import COMPILE_IN_ONE_PROCESS, setup
from sadl_models.train.progress import (
    PLOT_NAME,
    ProgressBar,
    StopFlag,
    plot_losses,
    stop_on_sigint,
)

__all__ = ["TrainResult", "build_model", "default_prompt", "preflight", "sample_text", "train"]


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


def train(
    config: TrainConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    explicit: set[str] | None = None,
    stop_after: int | None = None,
    progress: bool | None = None,
    stream: TextIO | None = None,
    plot: bool = True,
    on_step: Callable[[int, float], None] | None = None,
    compile: bool = False,
    overwrite: bool = False,
) -> TrainResult:
    """Train (or with ``resume``, continue) a GPT, checkpointing into ``out_dir``.

    An ``out_dir`` that already holds a checkpoint is refused (a TrainError) unless the run
    continues it (``resume``) or replaces it (``overwrite``): a command never destroys a run.

    ``explicit`` names the settings the user gave on a resumed run (others come from the
    checkpoint). ``stop_after`` ends this session after that many steps (saving a checkpoint),
    as Ctrl-C does. ``stream`` receives the log lines (default stdout). ``progress``: True for
    a progress bar, False for none, None for a bar on a terminal and plain lines otherwise.
    With ``compile`` the
    forward and backward passes (and the evaluation's forward) run under ``sadl.compile``:
    traced once, replayed after; the losses, checkpoints and samples are the same.
    Sizes whose memory estimate passes this machine's memory are refused before anything is
    built; running out of memory anyway is a TrainError with the estimate.
    """
    budget: dict[str, int] = {}  # the run's memory estimate, once the sizes are known
    try:
        return _run(
            config,
            out_dir,
            resume,
            explicit,
            stop_after,
            progress,
            stream,
            plot,
            on_step,
            compile,
            budget,
            overwrite,
        )
    except MemoryError:
        estimate = budget.get("bytes")
        about = f" (this run needs about {format_bytes(estimate)})" if estimate else ""
        raise TrainError(
            f"out of memory{about}; use a smaller --n-embd, --n-layer, --block-size or --batch-size"
        ) from None


def _run(
    config: TrainConfig,
    out_dir: str | os.PathLike[str],
    resume: bool,
    explicit: set[str] | None,
    stop_after: int | None,
    progress: bool | None,
    stream: TextIO | None,
    plot: bool,
    on_step: Callable[[int, float], None] | None,
    compile: bool,
    budget: dict[str, int],
    overwrite: bool = False,
) -> TrainResult:
    par = setup()
    if not par.is_main:  # rank 0 speaks for the run
        stream, progress, plot = io.StringIO(), False, False
    out = stream or sys.stdout
    started = time.perf_counter()
    out_path = Path(out_dir)
    ckpt_path = out_path / CHECKPOINT_NAME
    if stop_after is not None and stop_after <= 0:
        raise TrainError(f"--stop-after must be a positive integer, got {stop_after}")

    config, meta, text, digest = preflight(
        config, out_path, resume=resume, overwrite=overwrite, explicit=explicit
    )
    if compile and par.world_size > 1:
        raise TrainError(COMPILE_IN_ONE_PROCESS)
    device = par.device(check_device(config.device))
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
    budget["bytes"] = estimate_bytes(
        {**_sizes(config), "vocab_size": tokenizer.vocab_size},
        batch=max(config.batch_size, 1),
        training=True,
    )
    check_fits_in_memory(
        budget["bytes"],
        "this run",
        "use a smaller --n-embd, --n-layer, --block-size or --batch-size",
    )
    prepare_out_dir(out_path)  # only now: a run refused above leaves no --out behind

    rng = np.random.default_rng(config.seed)
    gpt = build_model(config, tokenizer.vocab_size, rng)
    if device != "cpu":
        gpt.to(device)
    model = par.wrap(gpt)
    optimizer, scheduler = _optimizer(config, model, par.optimizer)
    state = RunState(gpt, optimizer, scheduler, rng)
    history = History()
    step = 0

    def save(at: int) -> None:
        extra = {
            "model": gpt.config,
            "tokenizer": tokenizer.to_dict(),
            "train": config.to_dict(),
            "history": history.to_dict(),
            "unigram": unigram,
            "corpus_sha256": digest,
        }
        save_run(ckpt_path, at, state, extra, par.save_checkpoint)

    if meta is not None:
        step, history = restore(ckpt_path, meta, config, state, out)
    elif ckpt_path.exists():
        # Replace the old run as a whole before its metrics are: a run killed before its
        # first checkpoint then resumes as the new run, never as the old one.
        print(f"note: --overwrite: {ckpt_path} is replaced", file=out, flush=True)
        save(0)
    train_batches, val_batches = _eval_batches(config, train_tokens, val_tokens, device)
    n_tokens = (len(train_tokens), len(val_tokens))
    _announce(config, gpt, device, tokenizer, n_tokens, unigram, out, compiled=compile)
    if par.world_size > 1:
        print(f"data parallel: {par.world_size} processes", file=out, flush=True)

    steps = _Steps(model, gpt, optimizer, scheduler, config.grad_clip, compile)

    def evaluate() -> tuple[float, float]:
        if not par.is_main:  # only rank 0's numbers are logged and saved
            return math.nan, math.nan
        return steps.evaluate(train_batches), steps.evaluate(val_batches)

    flag = StopFlag(out)
    session_steps = 0
    interrupted = False
    tokens_per_step = config.batch_size * config.block_size
    bar = ProgressBar(config.steps, step, progress, tokens_per_step, out)
    metrics = (  # rank 0 writes the files
        MetricsLog(out_path / METRICS_NAME, resume_step=step if meta is not None else None)
        if par.is_main
        else None
    )
    saved_at = step if meta is not None or ckpt_path.exists() else None  # on disk: this step
    with stop_on_sigint(flag):  # Ctrl-C only sets a flag from here until the last file is written
        try:
            while step < config.steps:
                if par.any(flag.requested) or (
                    stop_after is not None and session_steps >= stop_after
                ):
                    interrupted = True
                    break
                step_start = time.perf_counter()
                lr = float(optimizer.param_groups[0]["lr"])  # what this step uses
                x, y = par.windows(train_tokens, config.block_size, config.batch_size, rng)
                if device != "cpu":
                    x, y = _to(x, device), _to(y, device)
                value = par.mean(steps.train(x, y))
                seconds = time.perf_counter() - step_start
                if not math.isfinite(value):
                    raise TrainError(
                        f"the loss became {value} at step {step + 1}; lower --lr and start again"
                    )
                history.train.append(value)
                step += 1
                session_steps += 1
                if on_step is not None:
                    on_step(step, value)
                bar.step(step, value, lr)
                record = {
                    "step": step,
                    "loss": value,
                    "lr": lr,
                    "tokens_per_s": tokens_per_step / seconds,
                    "time": time.perf_counter() - started,
                }
                evaluated = step % config.eval_interval == 0 or step == config.steps
                if evaluated:
                    evaluation = (step, *evaluate())
                    history.evals.append(evaluation)
                    record.update(train_loss=evaluation[1], val_loss=evaluation[2])
                    bar.write(
                        f"step {step}: train loss {evaluation[1]:.4f}, "
                        f"val loss {evaluation[2]:.4f}",
                        out,
                    )
                # The step's line before its checkpoint: a run killed in between resumes
                # from the previous checkpoint and rewrites the line, never loses it.
                if metrics is not None:
                    metrics.write(record)
                if evaluated:
                    save(step)
                    saved_at = step
        finally:
            bar.close()
            if metrics is not None:
                metrics.close()
        if saved_at != step:
            save(step)
        plot_path = plot_losses(history, unigram, out_path / PLOT_NAME) if plot else None

    if history.evals and history.evals[-1][0] == step:
        _, train_loss, val_loss = history.evals[-1]
    elif interrupted:  # leave promptly: the losses are those of the last evaluation, if any
        _, train_loss, val_loss = history.evals[-1] if history.evals else (0, math.nan, math.nan)
    else:
        train_loss, val_loss = evaluate()
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
        if metrics is not None:
            print(f"metrics: {metrics.path} (one JSON line per step)", file=out)
        if config.sample_tokens and par.is_main:
            sample = sample_text(gpt, tokenizer, val_tokens, config.sample_tokens, config.seed)
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


# ------------------------------------------------------------------ set-up
def preflight(
    config: TrainConfig,
    out_dir: str | os.PathLike[str],
    *,
    resume: bool = False,
    overwrite: bool = False,
    explicit: set[str] | None = None,
) -> tuple[TrainConfig, dict[str, Any] | None, str, str]:
    """Every refusal a run makes before it creates anything: the run's settings, checkpoint
    metadata (None for a new run), text and the text's SHA-256. ``sadl train gpt --nproc``
    calls it once before starting the processes, so that a refusal is printed once.
    """
    check_run_dir(Path(out_dir), resume, overwrite)
    meta = read_meta(Path(out_dir) / CHECKPOINT_NAME) if resume else None
    if meta is not None:
        config = resume_config(config, meta, explicit or set())
    config.validate()
    if meta is None:
        config = dataclasses.replace(config, warmup_steps=config.warmup)  # saved explicitly
    text = _corpus(config)
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    if meta is not None and meta["extra"].get("corpus_sha256") not in (None, digest):
        raise TrainError(
            f"--resume: {_source(config)} is not the text the checkpoint was trained on (its "
            "SHA-256 differs); resume with the same text or start a new run in another --out"
        )
    return config, meta, text, digest


def _source(config: TrainConfig) -> str:
    """How messages name the training text."""
    return "the built-in corpus" if config.text is None else config.text


def _corpus(config: TrainConfig) -> str:
    try:
        if config.text is None:
            return builtin_corpus()
        return read_text(config.text, any_bytes=config.tokenizer == "byte")
    except CorpusError as exc:
        raise TrainError(f"--text {exc}" if config.text is not None else str(exc)) from None


def _split(
    config: TrainConfig, tokenizer: Tokenizer, text: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    tokens = tokenizer.encode(text)
    train_tokens, val_tokens = split_tokens(tokens, config.val_fraction)
    need = config.block_size + 1
    if len(val_tokens) < need or len(train_tokens) < need:
        raise TrainError(
            f"--block-size {config.block_size} is too large for {_source(config)}: it has "
            f"{len(tokens)} tokens, {len(val_tokens)} of them held out for validation, and each "
            f"part needs at least block size + 1 = {need}"
        )
    return train_tokens, val_tokens


def _sizes(config: TrainConfig) -> dict[str, Any]:
    """The model sizes of ``config`` (as ``GPT.config`` names them, without the vocabulary)."""
    names = ("block_size", "n_layer", "n_head", "n_embd")
    return {name: getattr(config, name) for name in names}


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
        checkpoint_activations=config.checkpoint_activations,
    )


def _optimizer(
    config: TrainConfig, model: Any, wrap: Callable[[Any], Any]
) -> tuple[Any, CosineWithWarmup]:
    """AdamW (decaying matrices, not biases or LayerNorm parameters) and its cosine schedule.

    ``wrap`` may put the optimizer in another (sharding its state over several processes).
    """
    optimizer = wrap(
        AdamW(
            param_groups_for_weight_decay(model, config.weight_decay),
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=1e-8,
            weight_decay=config.weight_decay,
        )
    )
    scheduler = CosineWithWarmup(
        optimizer, warmup_steps=config.warmup, total_steps=config.steps, min_lr=config.final_lr
    )
    return optimizer, scheduler


def _eval_batches(
    config: TrainConfig, train_tokens: Any, val_tokens: Any, device: str
) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]]:
    """The fixed (train, val) batches every evaluation measures.

    They are drawn once, from their own generator: evaluating never changes the training run's
    random stream.
    """
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
    return train_batches, val_batches


def _announce(
    config: TrainConfig,
    model: GPT,
    device: str,
    tokenizer: Tokenizer,
    n_tokens: tuple[int, int],
    unigram: float,
    out: TextIO,
    *,
    compiled: bool = False,
) -> None:
    """The two lines a run starts with: the model (and how it runs), the data and its baseline."""
    source = "built-in corpus (pydoc_data.topics)" if config.text is None else config.text
    how = ", compiled (sadl.compile: traced once, then replayed)" if compiled else ""
    print(
        f"training GPT: {model.num_parameters() / 1e6:.2f}M parameters, {config.n_layer} layers, "
        f"{config.n_head} heads, {config.n_embd} dims, block {config.block_size}, "
        f"batch {config.batch_size}, {config.steps} steps on {device}{how}",
        file=out,
    )
    print(
        f"data: {source}, {sum(n_tokens):,} tokens "
        f"({tokenizer.kind} tokenizer, vocab {tokenizer.vocab_size}), "
        f"{n_tokens[0]:,} train / {n_tokens[1]:,} val; "
        f"unigram baseline {unigram:.4f} nats/token",
        file=out,
        flush=True,
    )


# ------------------------------------------------------------------ steps


class _Steps:
    """A training step and an evaluation pass, compiled with ``sadl.compile`` when asked.

    Compiled, the whole step is one replay: forward, backward, gradient clipping (its factor
    stays an array, nothing is read into Python) and the AdamW update (over flat buffers,
    with sadl-kernels' fused kernel where installed); only the schedule's learning rate is set
    in Python between steps, and each replay reads it.
    """

    def __init__(
        self,
        model: Any,
        evaluated: GPT,
        optimizer: Any,
        scheduler: CosineWithWarmup,
        grad_clip: float,
        compiled: bool,
    ) -> None:
        self.model = model  # what trains (wrapped for data parallelism)
        self.evaluated = evaluated  # the GPT itself
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.grad_clip = grad_clip
        self._step = sadl.compile(self._whole_step) if compiled else self._whole_step
        self._eval_loss = sadl.compile(self._loss) if compiled else self._loss

    def _whole_step(self, x: Any, y: Any) -> Any:
        _, loss = self.model(x, y)
        assert loss is not None
        self.optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        return loss

    def _loss(self, x: Any, y: Any) -> Any:
        _, loss = self.evaluated(x, y)
        assert loss is not None
        return loss

    def train(self, x: Any, y: Any) -> float:
        """One training step on the batch (x, y); the batch loss."""
        loss = self._step(x, y)
        self.scheduler.step()
        return float(loss.item())

    def evaluate(self, batches: list[tuple[Any, Any]]) -> float:
        """The mean loss over ``batches``, in evaluation mode and without gradients."""
        self.evaluated.eval()
        try:
            with sadl.no_grad():
                total = sum(float(self._eval_loss(x, y).item()) for x, y in batches)
            return total / len(batches)
        finally:
            self.evaluated.train()


def _to(array: np.ndarray[Any, Any], device: str) -> Any:
    from sadl.backends import to_device

    return to_device(array, device)


# ------------------------------------------------------------------ sampling


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
