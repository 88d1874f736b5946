"""The JSON document of a checkpoint or a saved object: tagged values and the integrity record.

A checkpoint (``save_checkpoint``) or a nested object (``sadl.save({"model": sd, "epoch": 3})``)
is a plain ``.sadl`` file of format version 1: every array becomes a tensor entry, and
everything else is one JSON document stored as a ``uint8`` tensor, the file's first entry
(``__meta__`` for a checkpoint, ``__object__`` for an object). JSON keeps Python types exactly
through small tags: tuples, non-string dict keys, non-finite floats and NumPy scalars survive
the round trip. Nothing is ever pickled.

Integrity: the document's last key is a record of the CRC32 of the document without it, and
the dtype, shape and CRC32 of every other entry, so every header field (keys, dtypes, shapes)
and every data byte is covered. Document version 2 (what this package writes) always has the
record, so removing or renaming it is damage, not an "older file"; a version-1 document (an
older writer) without one loads unchecked, but only when nothing of the newer kind is in it:
an unknown top-level key is refused, and a document that has a record must be byte for byte
the canonical JSON this package writes. No single damaged byte therefore loads silently (the
test suite flips every bit of a small checkpoint).
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import is_array

from sadl_serialize.bounded_json import loads_bounded
from sadl_serialize.errors import SadlFormatError
from sadl_serialize.sadl_format import SINGLE_KEY, _host_array, _short

__all__ = [
    "META_KEY",
    "OBJECT_KEY",
    "decode",
    "document_entries",
    "encode",
    "load_object",
    "object_entries",
    "read_document",
]

#: The entry holding a checkpoint's JSON document.
META_KEY = "__meta__"
#: The entry holding the JSON document of a nested object saved with ``sadl.save``.
OBJECT_KEY = "__object__"
VERSION = 2  # the document version written: the integrity record is always there
_READABLE = (1, 2)
_INTEGRITY = "integrity"
# JSON objects carrying one of these keys are tagged values, not plain dicts.
_TENSOR, _TUPLE, _FLOAT, _DICT = "__tensor__", "__tuple__", "__float__", "__dict__"
_TAGS = frozenset({_TENSOR, _TUPLE, _FLOAT, _DICT})
_RESERVED = frozenset({META_KEY, OBJECT_KEY, SINGLE_KEY})
_OBJECT_KIND = "sadl-object"
_OBJECT_WHAT = "sadl object"
_DAMAGED = "changed after it was written (a damaged copy or disk?); restore it from a backup"


def document_entries(
    key: str, body: dict[str, Any], tensors: dict[str, Any]
) -> dict[str, np.ndarray[Any, Any]]:
    """The entries of a file: the JSON document of ``body`` under ``key``, then the arrays.

    ``body`` starts with ``"format"``; the version and the integrity record are added here.
    """
    host = {name: _host_array(value) for name, value in tensors.items()}  # the bytes written
    meta = {"format": body["format"], "version": VERSION, **body}
    meta[_INTEGRITY] = {
        "algorithm": "crc32",
        "meta": zlib.crc32(_canonical(meta)),
        "entries": {
            name: {"dtype": array.dtype.name, "shape": list(array.shape), "crc32": _crc32(array)}
            for name, array in host.items()
        },
    }
    return {key: np.frombuffer(_canonical(meta), dtype=np.uint8), **host}


def object_entries(obj: Any) -> dict[str, np.ndarray[Any, Any]]:
    """The entries of a file holding the nested object ``obj`` (``sadl.save``)."""
    tensors: dict[str, Any] = {}
    body = {"format": _OBJECT_KIND, "object": encode(obj, "", tensors, "sadl.save")}
    return document_entries(OBJECT_KEY, body, tensors)


def load_object(name: str, entries: dict[str, Tensor], verify: bool | None) -> Any:
    """The object a file of :func:`object_entries` holds (``entries`` are its tensors)."""
    body = read_document(
        name, OBJECT_KEY, _OBJECT_KIND, frozenset({"object"}), entries, verify, _OBJECT_WHAT
    )
    try:
        return decode(body.get("object"), entries)
    except (KeyError, TypeError, ValueError) as exc:
        raise SadlFormatError(
            name, None, f"corrupt object metadata: {exc}", format=_OBJECT_WHAT
        ) from None


def read_document(
    path: str | os.PathLike[str],
    key: str,
    kind: str,
    fields: frozenset[str],
    entries: dict[str, Tensor],
    verify: bool | None,
    what: str,
) -> dict[str, Any]:
    """Pop the document ``key`` from ``entries`` and check it, and its integrity record.

    ``kind`` is the expected ``"format"``, ``fields`` the other top-level keys it may have;
    ``what`` names such a file in errors. ``verify=None`` checks the record unless the file
    is a version-1 document without one (an older writer's), ``True`` refuses such a file too,
    ``False`` skips the record. Returns the document without its record.
    """
    name = os.fspath(path)
    data = entries.pop(key).numpy()
    if data.dtype != np.uint8 or data.ndim != 1:
        raise SadlFormatError(
            name, None, f"{key!r} must be a 1-d uint8 tensor of JSON", format=what
        )
    raw = data.tobytes()
    try:
        meta = loads_bounded(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SadlFormatError(
            name, None, f"{key!r} is not valid JSON: {exc}", format=what
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != kind:
        raise SadlFormatError(name, None, f"{key!r} does not describe a {what}", format=what)
    version = meta.get("version")
    if type(version) is not int or version not in _READABLE:
        raise SadlFormatError(
            name,
            None,
            f"{what} version {version!r} is not supported; this reader supports versions "
            f"{', '.join(map(str, _READABLE))}",
            format=what,
        )
    unknown = sorted(set(meta) - fields - {"format", "version", _INTEGRITY})
    if unknown:  # a renamed record (or a newer writer's field) is never ignored
        raise SadlFormatError(
            name, None, f"{key!r} has unknown keys {unknown[:3]}: it {_DAMAGED}", format=what
        )
    integrity = meta.pop(_INTEGRITY, None)
    if integrity is None:
        if version >= 2:
            raise SadlFormatError(
                name,
                None,
                f"its integrity record is missing (every version-{version} file has one): it "
                f"{_DAMAGED}",
                format=what,
            )
        if verify:
            raise SadlFormatError(
                name,
                None,
                "it has no integrity record to verify (an older sadl-serialize wrote it); pass "
                "verify=False to load it unchecked, and save it again to add one",
                format=what,
            )
        return meta
    if verify is not False:
        _verify(name, raw, meta, integrity, entries, what)
    return meta


def _verify(
    name: str,
    raw: bytes,
    meta: dict[str, Any],
    integrity: Any,
    entries: dict[str, Tensor],
    what: str,
) -> None:
    """Raise ``SadlFormatError`` unless the document and every entry match the record."""

    def damaged(reason: str) -> SadlFormatError:
        return SadlFormatError(name, None, f"{reason}: it {_DAMAGED}", format=what)

    expected = integrity.get("entries") if isinstance(integrity, dict) else None
    if not isinstance(expected, dict) or integrity.get("algorithm") != "crc32":
        raise damaged("its checksum record is damaged")
    if raw != _canonical({**meta, _INTEGRITY: integrity}):
        raise damaged("its metadata is not the JSON this package writes")
    if zlib.crc32(_canonical(meta)) != integrity.get("meta"):
        raise damaged("its metadata fails its CRC32 check")
    if set(expected) != set(entries):
        odd = sorted(set(expected) ^ set(entries))[:3]
        raise damaged(f"its entries do not match its checksum record ({odd})")
    for key, tensor in entries.items():
        record, array = expected[key], _host_array(tensor)
        if isinstance(record, dict):
            header = (record.get("dtype"), record.get("shape"))
            if header != (array.dtype.name, list(array.shape)):
                raise damaged(
                    f"entry {_short(key)} is {array.dtype.name} of shape {tuple(array.shape)}, "
                    f"but its record says {header[0]} of shape {header[1]}"
                )
            record = record.get("crc32")
        elif meta["version"] >= 2:  # version 1 recorded the data's checksum only
            raise damaged(f"the record of entry {_short(key)} is damaged")
        if _crc32(array) != record:
            raise damaged(f"the data of entry {_short(key)} fails its CRC32 check")


def _canonical(meta: dict[str, Any]) -> bytes:
    """The JSON document of ``meta`` (parsing it back and writing it again gives these bytes)."""
    return json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")


def _crc32(array: np.ndarray[Any, Any]) -> int:
    """CRC32 of an entry's data as the file stores it (C-order little-endian bytes)."""
    return zlib.crc32(array.reshape(-1).view(np.uint8).data)


def _reject_constant(text: str) -> Any:
    raise ValueError(f"bare {text} is not JSON")


# ------------------------------------------------------------------ the tagged JSON encoding
def child(path: str, key: Any) -> str:
    """The key path of ``key`` below ``path`` (``""`` is the root)."""
    return f"{path}.{key}" if path else str(key)


def encode(value: Any, path: str, tensors: dict[str, Any], who: str) -> Any:
    """``value`` as JSON; arrays and Tensors go into ``tensors`` under a key made from ``path``.

    Anything else than None, bools, ints, floats, strings, lists, tuples, dicts, arrays and
    Tensors raises ``TypeError`` naming ``path``, prefixed with ``who`` (the public function).
    """
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {_FLOAT: repr(value)}
    if isinstance(value, Tensor) or is_array(value) or isinstance(value, np.generic):
        key, n = path or "0", 1
        while key in tensors or key in _RESERVED:
            n += 1
            key = f"{path}#{n}"
        tensors[key] = value
        kind = (
            "tensor"
            if isinstance(value, Tensor)
            else "scalar"
            if isinstance(value, np.generic)
            else "array"
        )
        return {_TENSOR: key, "type": kind}
    if isinstance(value, tuple):
        return {_TUPLE: [encode(v, child(path, i), tensors, who) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode(v, child(path, i), tensors, who) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and not _TAGS.intersection(value):
            return {k: encode(v, child(path, k), tensors, who) for k, v in value.items()}
        return {
            _DICT: [
                [_encode_key(k, path, who), encode(v, child(path, k), tensors, who)]
                for k, v in value.items()
            ]
        }
    hint = "; save its state_dict() instead" if callable(getattr(value, "state_dict", None)) else ""
    where = path or "the object"
    raise TypeError(
        f"{who}: cannot store {where} ({type(value).__name__}): only Tensors, arrays, None, "
        f"bools, numbers, strings, lists, tuples and dicts can be saved (never pickle){hint}"
    )


def _encode_key(key: Any, path: str, who: str) -> Any:
    """A dict key that is not a string: a number, None, or a tuple of such."""
    if isinstance(key, np.generic):
        key = key.item()
    scratch: dict[str, Any] = {}
    encoded = encode(key, child(path, "<key>"), scratch, who)
    if scratch:
        raise TypeError(f"{who}: {path or 'the object'} has an array or Tensor as a dict key")
    return encoded


def decode(value: Any, tensors: dict[str, Tensor]) -> Any:
    """Inverse of :func:`encode` (``tensors`` are the file's entries)."""
    if isinstance(value, list):
        return [decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if _TENSOR in value:
        tensor = tensors[value[_TENSOR]]
        kind = value.get("type")
        if kind == "tensor":
            return tensor
        if kind == "array":
            return tensor.data
        if kind == "scalar":
            return tensor.data[()]
        raise ValueError(f"unknown tensor type {kind!r}")
    if _TUPLE in value:
        return tuple(decode(v, tensors) for v in value[_TUPLE])
    if _FLOAT in value:
        text = value[_FLOAT]
        if text not in ("nan", "inf", "-inf"):
            raise ValueError(f"bad float {text!r}")
        return float(text)
    if _DICT in value:
        return {decode(k, tensors): decode(v, tensors) for k, v in value[_DICT]}
    return {k: decode(v, tensors) for k, v in value.items()}
