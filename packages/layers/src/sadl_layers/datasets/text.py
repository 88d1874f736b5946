"""A UTF-8 text file from any path, and the tiny Shakespeare of char-rnn and nanoGPT.

``tiny_shakespeare`` is the exact ``input.txt`` of karpathy/char-rnn (1,115,394 characters),
the file nanoGPT's ``shakespeare_char`` prepares. It is not shipped; the error says how to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

from sadl_layers.datasets._missing import DatasetNotFoundError

__all__ = ["TINY_SHAKESPEARE_URL", "read_text", "tiny_shakespeare"]

#: Where nanoGPT's data/shakespeare_char/prepare.py downloads the file from.
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)


def read_text(path: str | os.PathLike[str], hint: str = "") -> str:
    """The UTF-8 text of ``path``; a missing file raises with ``hint`` (how to get it)."""
    p = Path(path)
    if not p.is_file():
        raise DatasetNotFoundError(f"{p}: no such text file" + (f": {hint}" if hint else ""))
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text (byte offset {exc.start})") from None


def tiny_shakespeare(path: str | os.PathLike[str]) -> str:
    """The tiny Shakespeare text at ``path`` (fetch it once with the command in the error)."""
    return read_text(path, f"download it once with: curl -o {path} {TINY_SHAKESPEARE_URL}")
