"""``.gguf`` (llama.cpp's format) read through ``gguf``, llama.cpp's own Python reader.

A GGUF file holds typed metadata (``general.architecture``, ``llama.block_count``, the
tokenizer's ``tokenizer.ggml.*`` ...) and tensors, many of them block-quantized. Reading here:

* :func:`read_gguf` parses the header and the tensor index (nothing is dequantized), checks that
  every tensor's data lies inside the file (a truncated download is refused here, naming the
  first tensor cut off) and that every tensor type is one this reader dequantizes;
* :func:`dequantize` turns one tensor into float32 in NumPy order (GGUF lists dimensions
  innermost first; the arrays here have them reversed, as the data is laid out);
* :func:`load_gguf` (``sadl.load("m.gguf")``) is both: a dict of float32 Tensors by GGUF name.

Supported tensor types: F32, F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (the types of the common
llama.cpp quantizations); any other type raises :class:`SadlFormatError` naming the tensor and
the type. Values are exactly ``gguf.quants.dequantize``'s. Writing GGUF is not supported.
``gguf`` is an optional dependency (``pip install "sadl-serialize[gguf]"``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sadl
from sadl import Device, Tensor

from sadl_serialize.errors import SadlFormatError

__all__ = ["GGUFFile", "GGUFTensor", "SUPPORTED_TYPES", "dequantize", "load_gguf", "read_gguf"]

#: The tensor types dequantized to float32.
SUPPORTED_TYPES = ("F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K")
_FORMAT = ".gguf"
MAGIC = b"GGUF"


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file: its name, type name, NumPy-order shape and stored bytes."""

    name: str
    type: str
    shape: tuple[int, ...]
    nbytes: int
    data: Any = field(repr=False)  # the raw (memory-mapped) array the reader gives
    qtype: Any = field(repr=False)


@dataclass(frozen=True)
class GGUFFile:
    """A validated GGUF file: its metadata (key -> Python value) and tensors in file order."""

    path: str
    metadata: dict[str, Any]
    tensors: list[GGUFTensor]

    def tensor(self, name: str) -> GGUFTensor:
        """The tensor called ``name``; KeyError naming the file when there is none."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"{self.path}: no tensor {name!r} in this GGUF file")


def _gguf() -> Any:
    try:
        import gguf
    except ImportError:
        raise ImportError(
            "reading .gguf files needs the 'gguf' package: pip install \"sadl-serialize[gguf]\""
        ) from None
    return gguf


def _value(reader_field: Any) -> Any:
    """A metadata field as a Python value (str, int, float, bool or a list of them)."""
    value = reader_field.contents()
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Parse and validate the GGUF file at ``path`` (its data stays memory-mapped).

    Raises :class:`SadlFormatError` naming the file for a file that is not GGUF, is truncated
    or holds a tensor type outside :data:`SUPPORTED_TYPES`; ``OSError`` when it cannot be read.
    """
    name = os.fspath(path)
    gguf = _gguf()
    size = os.path.getsize(name)
    with open(name, "rb") as fh:
        head = fh.read(4)
    if head != MAGIC:
        raise SadlFormatError(
            name, 0, f"expected the magic {MAGIC!r}, got {head!r}", format=_FORMAT
        )
    try:
        reader = gguf.GGUFReader(name)
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, UnicodeDecodeError) as exc:
        # The reader memory-maps the file and fails in NumPy when a length runs past its end.
        raise SadlFormatError(
            name, None, f"cannot parse the header or tensor index (truncated?): {exc}",
            format=_FORMAT,
        ) from None  # fmt: skip
    tensors = []
    for t in reader.tensors:
        kind = t.tensor_type.name
        end = int(t.data_offset) + int(t.n_bytes)
        if end > size:
            raise SadlFormatError(
                name, int(t.data_offset),
                f"truncated: tensor {t.name!r} needs bytes up to {end} but the file has {size}",
                format=_FORMAT,
            )  # fmt: skip
        if kind not in SUPPORTED_TYPES:
            raise SadlFormatError(
                name, int(t.data_offset),
                f"tensor {t.name!r} has the unsupported type {kind}; supported: "
                f"{', '.join(SUPPORTED_TYPES)}",
                format=_FORMAT,
            )  # fmt: skip
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        tensors.append(GGUFTensor(t.name, kind, shape, int(t.n_bytes), t.data, t.tensor_type))
    metadata = {}
    for key, reader_field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # the header's own counts
        try:
            metadata[key] = _value(reader_field)
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise SadlFormatError(
                name, None, f"metadata {key!r} cannot be read: {exc}", format=_FORMAT
            ) from None
    return GGUFFile(name, metadata, tensors)


def dequantize(tensor: GGUFTensor) -> np.ndarray[Any, Any]:
    """``tensor`` as a float32 array of its NumPy-order shape (a fresh copy)."""
    gguf = _gguf()
    out = np.asarray(gguf.quants.dequantize(np.asarray(tensor.data), tensor.qtype))
    return np.ascontiguousarray(out.reshape(tensor.shape), dtype=np.float32)


def load_gguf(
    path: str | os.PathLike[str], device: Device | str | None = None
) -> dict[str, Tensor]:
    """Every tensor of a GGUF file as a float32 Tensor, by GGUF name (``sadl.load``'s reader)."""
    file = read_gguf(path)
    out = {}
    for t in file.tensors:
        array = dequantize(t)
        out[t.name] = Tensor(array) if device is None else sadl.tensor(array, device=device)
    return out


def save_gguf(obj: Any, path: str | os.PathLike[str]) -> None:
    """Refused: sadl reads GGUF files but does not write them."""
    raise NotImplementedError(
        f"{os.fspath(path)}: sadl cannot write .gguf files (save as .safetensors or .sadl; "
        "llama.cpp's convert scripts turn safetensors into GGUF)"
    )
