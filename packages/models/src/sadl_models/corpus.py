"""Training text: the built-in corpus (no download needed) or any UTF-8 file.

The built-in corpus is CPython's own ``pydoc_data.topics``: the language reference topics that
``help("topics")`` shows, about 460 KB of English prose and code, present in every Python.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CorpusError",
    "builtin_corpus",
    "read_text",
    "split_tokens",
    "unigram_cross_entropy",
]

BUILTIN_NAME = "pydoc_data.topics"


class CorpusError(ValueError):
    """The training text cannot be used (missing, unreadable, not UTF-8, empty, too short)."""


def builtin_corpus() -> str:
    """The text of every topic in ``pydoc_data.topics``, in sorted topic order."""
    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # some distributions strip it; say so instead of failing later
        raise CorpusError(
            f"the built-in corpus ({BUILTIN_NAME}) is missing from this Python installation; "
            "pass --text FILE"
        ) from exc
    return "\n\n".join(topics[key].strip("\n") for key in sorted(topics)) + "\n"


def read_text(path: str | os.PathLike[str], *, any_bytes: bool = False) -> str:
    """The contents of the UTF-8 text file ``path`` (a BOM is dropped).

    Raises :class:`CorpusError` with a one-line reason for a missing file, a directory, an
    unreadable file, bytes that are not UTF-8 (naming the offset) and an empty file. With
    ``any_bytes`` (the byte tokenizer: bytes are bytes) every file reads: a byte that is not
    UTF-8 becomes a lone surrogate (``surrogateescape``), which ``ByteTokenizer.encode`` turns
    back into that very byte.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise CorpusError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise CorpusError(f"{p}: is a directory, not a text file") from None
    except PermissionError:
        raise CorpusError(f"{p}: permission denied") from None
    except OSError as exc:
        raise CorpusError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig", "surrogateescape" if any_bytes else "strict")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        raise CorpusError(
            f"{p}: not UTF-8 text (byte 0x{bad} at offset {exc.start} is invalid); "
            "convert it to UTF-8 first, or train on its bytes with --tokenizer byte"
        ) from None
    if not text.strip():
        raise CorpusError(f"{p}: the file is empty")
    return text


def split_tokens(
    tokens: np.ndarray[Any, Any], val_fraction: float
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Contiguous split: the first ``1 - val_fraction`` of the tokens train, the rest validate.

    A contiguous split (not a shuffled one) keeps validation text unseen: no window of the
    validation part overlaps a training window. The cut is nanoGPT's (its ``prepare.py``:
    ``int(n * 0.9)`` training tokens), so the same text splits into the same two parts; at
    least one token validates.
    """
    if not 0.0 < val_fraction < 1.0:
        raise CorpusError(f"the validation fraction must be in (0, 1), got {val_fraction}")
    n_train = min(int(len(tokens) * (1.0 - val_fraction)), len(tokens) - 1)
    return tokens[:n_train], tokens[n_train:]


def unigram_cross_entropy(
    train: Sequence[int] | np.ndarray[Any, Any],
    val: Sequence[int] | np.ndarray[Any, Any],
    vocab_size: int,
) -> float:
    """Cross-entropy (nats/token) of ``val`` under ``train``'s token frequencies.

    The baseline a language model must beat: predict every token from its frequency alone.
    Add-one smoothing keeps tokens unseen in training finite.
    """
    counts = np.bincount(np.asarray(train, dtype=np.int64), minlength=vocab_size).astype(np.float64)
    probs = (counts + 1.0) / (counts.sum() + vocab_size)
    val_ids = np.asarray(val, dtype=np.int64)
    if val_ids.size == 0:
        raise CorpusError("no validation tokens to measure the unigram baseline on")
    value = float(-np.log(probs[val_ids]).mean())
    assert math.isfinite(value)
    return value
