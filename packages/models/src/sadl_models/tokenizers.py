"""Tokenizers: characters or UTF-8 bytes to integer ids and back, saved with the checkpoint.

Both are plain data: ``to_dict()`` is JSON, and ``tokenizer_from_dict`` rebuilds the tokenizer
from it, so a checkpoint carries its own vocabulary and ``sadl generate`` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

__all__ = [
    "ByteTokenizer",
    "CharTokenizer",
    "Tokenizer",
    "TokenizerError",
    "make_tokenizer",
    "tokenizer_from_dict",
]


class TokenizerError(ValueError):
    """Text that a tokenizer cannot encode, ids it cannot decode, or a malformed saved form."""


class Tokenizer(Protocol):
    """What the trainer and ``generate`` need from a tokenizer."""

    kind: str

    @property
    def vocab_size(self) -> int:
        """Number of distinct token ids (ids run from 0 to ``vocab_size - 1``)."""
        ...

    def encode(self, text: str) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Token ids of ``text`` as a 1-D int64 array."""
        ...

    def decode(self, ids: Iterable[int] | np.ndarray[Any, Any]) -> str:
        """The text of a sequence of ids."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable description that ``tokenizer_from_dict`` turns back into it."""
        ...


def _ids_array(ids: Iterable[int] | np.ndarray[Any, Any], vocab_size: int) -> np.ndarray[Any, Any]:
    arr = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids))
    if arr.size and arr.dtype.kind not in "iu":
        raise TokenizerError(f"token ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        bad = arr[(arr < 0) | (arr >= vocab_size)][0]
        raise TokenizerError(f"token id {int(bad)} is outside the vocabulary (0..{vocab_size - 1})")
    return arr


class CharTokenizer:
    """One token per Unicode character of a fixed alphabet (``chars``, each once, in id order).

    ``CharTokenizer.from_text(text)`` builds the alphabet from a corpus (sorted characters).
    Encoding a character outside the alphabet raises :class:`TokenizerError` naming it.
    """

    kind = "char"

    def __init__(self, chars: str) -> None:
        if not isinstance(chars, str) or not chars:
            raise TokenizerError("CharTokenizer needs a non-empty string of characters")
        if len(set(chars)) != len(chars):
            raise TokenizerError("CharTokenizer: the alphabet lists a character more than once")
        self.chars = chars
        self._index = {c: i for i, c in enumerate(chars)}
        # Lookup table for fast encoding of characters below U+10000 (the common case).
        self._table = np.full(0x10000, -1, dtype=np.int64)
        for c, i in self._index.items():
            if ord(c) < 0x10000:
                self._table[ord(c)] = i
        self._decode_table = np.array(list(chars), dtype=object)

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """The tokenizer whose alphabet is every distinct character of ``text``, sorted."""
        if not text:
            raise TokenizerError("cannot build a character vocabulary from empty text")
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        """Number of characters in the alphabet."""
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Ids of ``text``'s characters; raises naming any character outside the alphabet."""
        if not text:
            return np.zeros(0, dtype=np.int64)
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        ids = np.full(codes.shape, -1, dtype=np.int64)
        small = codes < 0x10000
        ids[small] = self._table[codes[small]]
        for pos in np.flatnonzero(~small):
            ids[pos] = self._index.get(chr(int(codes[pos])), -1)
        if (ids < 0).any():
            missing = sorted({chr(int(c)) for c in codes[ids < 0]})
            shown = ", ".join(repr(c) for c in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise TokenizerError(
                f"text contains {len(missing)} character(s) not in the tokenizer's vocabulary "
                f"of {self.vocab_size}: {shown}{more}"
            )
        return ids

    def decode(self, ids: Iterable[int] | np.ndarray[Any, Any]) -> str:
        """The characters of ``ids`` joined into a string."""
        arr = _ids_array(ids, self.vocab_size)
        return "".join(self._decode_table[arr].tolist())

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": "char", "chars": ...}``."""
        return {"kind": self.kind, "chars": self.chars}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.chars == self.chars

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class ByteTokenizer:
    """One token per byte of the UTF-8 encoding: 256 ids, every text encodes.

    A file of any bytes trains too: ``read_text(path, any_bytes=True)`` keeps each byte that is
    not UTF-8 as a lone surrogate (``surrogateescape``), and ``encode`` gives that byte back.

    Decoding a byte sequence that is not valid UTF-8 (a sample cut in the middle of a character)
    puts U+FFFD in place of the broken bytes rather than failing.
    """

    kind = "byte"

    @property
    def vocab_size(self) -> int:
        """Always 256."""
        return 256

    def encode(self, text: str) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The UTF-8 bytes of ``text`` as ids (an escaped lone surrogate: its byte)."""
        raw = text.encode("utf-8", "surrogateescape")
        return np.frombuffer(raw, dtype=np.uint8).astype(np.int64)

    def decode(self, ids: Iterable[int] | np.ndarray[Any, Any]) -> str:
        """The text of the bytes ``ids`` (invalid UTF-8 becomes U+FFFD)."""
        arr = _ids_array(ids, 256)
        return arr.astype(np.uint8).tobytes().decode("utf-8", errors="replace")

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": "byte"}``."""
        return {"kind": self.kind}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByteTokenizer)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "ByteTokenizer()"


TOKENIZER_KINDS = ("char", "byte")


def make_tokenizer(kind: str, text: str) -> CharTokenizer | ByteTokenizer:
    """A tokenizer of ``kind`` (``"char"`` or ``"byte"``) fitted to ``text``."""
    if kind == "char":
        return CharTokenizer.from_text(text)
    if kind == "byte":
        return ByteTokenizer()
    raise TokenizerError(
        f"unknown tokenizer {kind!r}: expected one of {', '.join(TOKENIZER_KINDS)}"
    )


def tokenizer_from_dict(data: Mapping[str, Any]) -> CharTokenizer | ByteTokenizer:
    """Rebuild a tokenizer from its ``to_dict()`` form (as stored in a checkpoint)."""
    if not isinstance(data, Mapping) or "kind" not in data:
        raise TokenizerError(f"not a saved tokenizer (expected a mapping with 'kind'): {data!r}")
    kind = data["kind"]
    if kind == "char":
        chars = data.get("chars")
        if not isinstance(chars, str):
            raise TokenizerError("saved char tokenizer has no 'chars' string")
        return CharTokenizer(chars)
    if kind == "byte":
        return ByteTokenizer()
    raise TokenizerError(f"unknown saved tokenizer kind {kind!r}")
