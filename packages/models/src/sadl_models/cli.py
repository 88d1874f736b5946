"""The ``sadl train gpt`` and ``sadl generate`` subcommands.

Bad input (a missing or non-UTF-8 file, a block size larger than the corpus, an unknown device,
a malformed number) prints one line, ``sadl <command>: error: <what was wrong>``, to stderr and
exits with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import sadl

from sadl_models.corpus import CorpusError
from sadl_models.tokenizers import TokenizerError

__all__ = ["register_commands"]

USAGE_ERROR = 2
INTERRUPTED = 130


def _one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` report a usage error as one line (argparse prints the usage too)."""

    def error(message: str) -> NoReturn:
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE_ERROR)

    parser.error = error  # type: ignore[method-assign]

    # Unknown options would otherwise travel up to the top-level parser, which prints its usage
    # too: report them here, in one line, naming this command.
    parse_known = parser.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        result, extras = parse_known(args, namespace)
        if extras:
            error(f"unrecognized arguments: {' '.join(extras)}")
        return result, extras

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _int_type(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def _float_type(
    minimum: float, *, open_low: bool = False, maximum: float | None = None
) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if maximum is not None:  # an interval (minimum, maximum]; NaN and inf fall outside
            ok, want = minimum < value <= maximum, f"a number in ({minimum:g}, {maximum:g}]"
        else:
            ok = math.isfinite(value) and (value > minimum if open_low else value >= minimum)
            want = f"a finite number {'>' if open_low else '>='} {minimum:g}"
        if not ok:  # quote what was typed, as every option does
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


POSITIVE = _int_type(1)
NON_NEGATIVE = _int_type(0)
POSITIVE_FLOAT = _float_type(0.0, open_low=True)
NON_NEGATIVE_FLOAT = _float_type(0.0)
PROBABILITY = _float_type(0.0, maximum=1.0)  # (0, 1]


def _add_train_gpt(sub: Any) -> argparse.ArgumentParser:
    from sadl_models.train import TrainConfig

    d = TrainConfig()
    p: argparse.ArgumentParser = sub.add_parser(
        "gpt",
        help="train a GPT-2 style character model (built-in corpus or --text FILE)",
        description=(
            "Train a GPT-2 style language model with AdamW, cosine warmup and gradient "
            "clipping; checkpoint (DIR/checkpoint.sadl), loss curve (DIR/loss.png) and a "
            "sample at the end. Ctrl-C saves a checkpoint; --resume continues it exactly. "
            "Without --text the corpus is Python's own pydoc_data.topics (no download)."
        ),
    )
    arg = p.add_argument
    arg(
        "--config",
        metavar="FILE",
        help="a TOML file of settings (block_size = 64, ...; names as the flags without their "
        "dashes); the flags given beside it take precedence",
    )
    arg("--text", metavar="FILE", help="UTF-8 text file to train on (default: built-in corpus)")
    arg("--tokenizer", choices=("char", "byte"), help=f"tokens (default: {d.tokenizer})")
    arg("--steps", type=POSITIVE, metavar="N", help=f"optimizer steps (default: {d.steps})")
    arg("--batch-size", type=POSITIVE, metavar="B", help=f"default: {d.batch_size}")
    arg(
        "--block-size", type=POSITIVE, metavar="T", help=f"context length (default: {d.block_size})"
    )
    arg("--n-layer", type=POSITIVE, metavar="L", help=f"default: {d.n_layer}")
    arg("--n-head", type=POSITIVE, metavar="H", help=f"default: {d.n_head}")
    arg("--n-embd", type=POSITIVE, metavar="C", help=f"default: {d.n_embd}")
    arg("--dropout", type=NON_NEGATIVE_FLOAT, metavar="P", help=f"default: {d.dropout}")
    arg(
        "--bias",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="biases in the Linear and LayerNorm layers (nanoGPT: --no-bias; default: "
        f"{'--bias' if d.bias else '--no-bias'})",
    )
    arg("--lr", type=POSITIVE_FLOAT, metavar="LR", help=f"peak learning rate (default: {d.lr})")
    arg(
        "--min-lr",
        type=NON_NEGATIVE_FLOAT,
        metavar="LR",
        help="final learning rate (default: lr/10)",
    )
    arg("--warmup-steps", type=NON_NEGATIVE, metavar="N", help="default: min(100, steps/10)")
    arg("--weight-decay", type=NON_NEGATIVE_FLOAT, metavar="W", help=f"default: {d.weight_decay}")
    arg(
        "--grad-clip",
        type=POSITIVE_FLOAT,
        metavar="G",
        help=f"max grad norm (default: {d.grad_clip})",
    )
    arg("--eval-interval", type=POSITIVE, metavar="N", help=f"default: {d.eval_interval}")
    arg("--eval-batches", type=POSITIVE, metavar="N", help=f"default: {d.eval_batches}")
    arg("--sample-tokens", type=NON_NEGATIVE, metavar="N", help=f"default: {d.sample_tokens}")
    arg("--seed", type=NON_NEGATIVE, metavar="S", help=f"default: {d.seed}")
    arg("--device", metavar="DEV", help=f"cpu, cuda or cuda:N (default: {d.device})")
    arg(
        "--checkpoint-activations",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="recompute each transformer block during backward instead of keeping its "
        "activations (sadl.checkpoint): less memory, about one more forward of time",
    )
    arg("--out", metavar="DIR", default="runs/gpt", help="output directory (default: runs/gpt)")
    arg("--resume", action="store_true", help="continue the run saved in --out")
    arg(
        "--overwrite",
        action="store_true",
        help="replace the run saved in --out (without it, or --resume, a checkpoint there is "
        "refused)",
    )
    arg(
        "--stop-after",
        type=POSITIVE,
        metavar="N",
        help="end this session after N steps, saving a checkpoint (continue with --resume)",
    )
    arg(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar (default: on a terminal; plain lines into a file or a pipe)",
    )
    arg(
        "--nproc",
        type=POSITIVE,
        metavar="N",
        help="train data-parallel in N processes on this machine (needs sadl-distributed; "
        "--batch-size is the global batch, split over them)",
    )
    arg(
        "--compile",
        action="store_true",
        help="trace the forward and backward pass once and replay it (sadl.compile); the "
        "losses are the same as without",
    )
    _add_threads(p)
    p.set_defaults(func=_cmd_train_gpt)
    _one_line_errors(p)
    return p


def _cmd_train_gpt(args: argparse.Namespace) -> int:
    from sadl_models.train import TrainConfig, TrainError, train

    prog = "sadl train gpt"
    keep_freed_memory()
    _set_threads(args.threads)
    try:
        given = _given(args)
        config = TrainConfig(**given)
        if not args.resume:
            config.validate()
        if args.nproc is not None and args.nproc > 1:
            from sadl_models.train.loop import preflight
            from sadl_models.train.parallel import COMPILE_IN_ONE_PROCESS, launch

            # Every refusal once, here, before any process starts (each rank would print it).
            config = preflight(
                config,
                args.out,
                resume=args.resume,
                overwrite=args.overwrite,
                explicit=set(given),
            )[0]
            if config.batch_size % args.nproc:
                raise TrainError(
                    f"--batch-size {config.batch_size} cannot be split evenly over "
                    f"{args.nproc} processes; use a multiple of {args.nproc}"
                )
            if args.compile:  # every rank would refuse it: say so once, before starting them
                raise TrainError(COMPILE_IN_ONE_PROCESS)
            return launch(args.nproc, ["train", "gpt", *_train_flags(args)])
        result = train(
            config,
            args.out,
            resume=args.resume,
            explicit=set(given),
            stop_after=args.stop_after,
            progress=args.progress,
            compile=args.compile,
            overwrite=args.overwrite,
        )
    except (TrainError, CorpusError, TokenizerError) as exc:
        return _fail(prog, str(exc))
    except OSError as exc:
        return _fail(prog, f"{exc.filename or args.out}: {exc.strerror or exc}")
    return INTERRUPTED if result.cancelled else 0


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of ``TrainConfig`` that the command line gave: ``--config FILE``'s, then
    the flags' (a flag beside ``--config`` overrides the file).
    """
    from sadl_models.train.config import read_config_file

    flags = _flag_settings(args)
    if getattr(args, "config", None) is None:
        return flags
    return {**read_config_file(args.config), **flags}


def _flag_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of ``TrainConfig`` given as flags (without ``--config FILE``'s)."""
    from sadl_models.train import TrainConfig

    names = {f.name for f in dataclasses.fields(TrainConfig)}
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def _train_flags(args: argparse.Namespace) -> list[str]:
    """The command line of ``sadl train gpt`` that ``args`` came from, without ``--nproc``
    (every other option: the ranks must train exactly as one process would).
    """
    from sadl_models.train.config import flag

    flags = ["--out", str(args.out)]
    if args.config is not None:  # each rank reads the same file
        flags += ["--config", str(args.config)]
    for name, value in sorted(_flag_settings(args).items()):  # a switch takes no value
        if isinstance(value, bool):
            flags.append(flag(name) if value else "--no-" + flag(name)[2:])
        else:
            flags += [flag(name), str(value)]
    for switch in ("resume", "overwrite", "compile"):
        if getattr(args, switch):
            flags.append(flag(switch))
    if args.stop_after is not None:
        flags += ["--stop-after", str(args.stop_after)]
    if args.progress is not None:  # None: each rank decides by its own terminal
        flags.append("--progress" if args.progress else "--no-progress")
    if args.threads is not None:
        flags += ["--threads", str(args.threads)]
    return flags


def _add_generate(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "generate",
        help="generate text from a checkpoint written by 'sadl train gpt'",
        description="Sample text from a trained GPT checkpoint (uses the KV cache).",
    )
    arg = p.add_argument
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", metavar="PATH", help="a checkpoint.sadl file")
    source.add_argument(
        "--pretrained",
        metavar="PATH",
        help="a published checkpoint: a .gguf file or a Hugging Face directory",
    )
    arg("--prompt", metavar="TEXT", help='text to continue (default: "The ")')
    arg("--chat", action="store_true", help="--pretrained: wrap the prompt in its chat template")
    arg(
        "--tokens",
        "--max-new-tokens",
        dest="tokens",
        type=NON_NEGATIVE,
        default=None,
        metavar="N",
        help="default: 300 (64 with --pretrained)",
    )
    arg(
        "--temperature",
        type=NON_NEGATIVE_FLOAT,
        default=None,
        metavar="T",
        help="0 is greedy (default: 0.8; 0 with --pretrained)",
    )
    arg("--top-k", type=POSITIVE, metavar="K", help="sample from the K most likely tokens")
    arg("--top-p", type=PROBABILITY, metavar="P", help="nucleus sampling, P in (0, 1]")
    arg("--seed", type=NON_NEGATIVE, default=0, metavar="S", help="default: 0")
    arg("--device", default="cpu", metavar="DEV", help="cpu, cuda or cuda:N (default: cpu)")
    arg("--no-cache", action="store_true", help="re-run the context per token (slower)")
    _add_threads(p)
    p.set_defaults(func=_cmd_generate)
    _one_line_errors(p)
    return p


def _cmd_generate(args: argparse.Namespace) -> int:
    import numpy as np

    from sadl_models.train import TrainError, check_device, default_prompt, load_model

    prog = "sadl generate"
    _set_threads(args.threads)
    if args.pretrained is not None:
        from sadl_models.pretrained.cli import generate_pretrained

        args.tokens = 64 if args.tokens is None else args.tokens
        return generate_pretrained(args)
    if args.chat:
        return _fail(prog, "--chat needs --pretrained (a checkpoint with a chat template)")
    args.tokens = 300 if args.tokens is None else args.tokens
    args.temperature = 0.8 if args.temperature is None else args.temperature
    model = None
    try:
        device = check_device(args.device)
        model, tokenizer = load_model(args.checkpoint, device=device)
        prompt = default_prompt(tokenizer) if args.prompt is None else args.prompt
        if not prompt:
            raise TrainError("--prompt is empty: give at least one character")
        try:
            ids = tokenizer.encode(prompt)
        except TokenizerError as exc:
            raise TrainError(f"--prompt: {exc}") from None
        out = model.generate(
            ids,
            args.tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            rng=np.random.default_rng(args.seed),
            use_cache=not args.no_cache,
        )
    except (TrainError, TokenizerError, CorpusError) as exc:
        return _fail(prog, str(exc))
    except OSError as exc:
        return _fail(prog, f"{exc.filename or args.checkpoint}: {exc.strerror or exc}")
    except MemoryError:
        from sadl_models.train.budget import estimate_bytes, format_bytes

        about = ""
        if model is not None:
            need = estimate_bytes(model.config, batch=1, training=False)
            about = f" (the model needs about {format_bytes(need)})"
        return _fail(prog, f"out of memory while generating{about}")
    print(tokenizer.decode(out), flush=True)
    return 0


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=POSITIVE,
        metavar="N",
        help="BLAS threads for every product (sadl.set_num_threads); default: sadl picks per "
        "product, one thread for small ones and on a busy machine",
    )


def _set_threads(threads: int | None) -> None:
    """Pin the BLAS threads when ``--threads`` was given; otherwise sadl's policy picks them
    per product (docs/getting-started.md, "Threads"; bench/threads.py measures it).
    """
    if threads is not None:
        sadl.set_num_threads(threads)


def keep_freed_memory() -> None:
    """Ask glibc to keep freed memory for reuse instead of returning it to the system.

    A training step allocates and frees the same large temporaries every step; by default glibc
    unmaps them each time and the next step page-faults them back in (about 9% of a GPT step
    here). This tunes the allocator of the ``sadl train`` process only, never at import.
    """
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # glibc's largest allowed value
        libc.mallopt(m_trim_threshold, 1024 * 1024 * 1024)
    except (OSError, AttributeError):
        return  # not glibc: keep the defaults


def _fail(prog: str, message: str, status: int = USAGE_ERROR) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return status


def register_commands(subparsers: Any) -> None:
    """Add ``train`` (with its ``gpt`` model) and ``generate`` to the ``sadl`` command line."""
    train = subparsers.add_parser(
        "train",
        help="train a model: sadl train gpt [options]",
        description="Train a model registered by sadl-models.",
    )
    models = train.add_subparsers(dest="model", metavar="MODEL", required=True)
    _add_train_gpt(models)
    _one_line_errors(train)
    _add_generate(subparsers)
