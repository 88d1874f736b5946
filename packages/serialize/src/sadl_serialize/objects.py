"""``sadl.save`` / ``sadl.load`` for ``.sadl`` files: tensors, flat dicts and nested objects.

A Tensor (or array) and a flat mapping of str to tensors are written in the layout py-sadl
2.0.0 reads and writes (:mod:`sadl_serialize.sadl_format`). Anything else, a checkpoint dict
such as ``{"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}``, nested dicts,
lists, tuples and plain Python values, is written on the same layout as its arrays plus one JSON
document under ``__object__`` (:mod:`sadl_serialize.metadata`), with an integrity record, and
loads back as it was saved. Never pickle.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from sadl import Device

from sadl_serialize import sadl_format
from sadl_serialize.metadata import OBJECT_KEY, load_object, object_entries

__all__ = ["dumps", "load", "loads", "save"]


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` to ``path`` (``.sadl``), atomically; :func:`load` gives it back.

    ``obj`` is a Tensor or array, a mapping of str to those (py-sadl's layout), or any nesting
    of dicts, lists and tuples of Tensors, arrays, NumPy scalars, None, bools, ints, floats and
    strings (dict keys: strings, numbers, None, or tuples of those). Anything else raises
    ``TypeError`` naming its key path, and a bad dtype or key ``TypeError``/``ValueError``
    naming the entry, before anything is written.
    """
    sadl_format.save(_entries(obj), path)


def dumps(obj: Any) -> bytes:
    """The ``.sadl`` bytes of ``obj`` (what :func:`save` would write), in memory."""
    return sadl_format.dumps(_entries(obj))


def load(
    path: str | os.PathLike[str], device: str | Device | None = None, *, mmap: bool = False
) -> Any:
    """Read what :func:`save` wrote: a Tensor, a dict of Tensors in file order, or the object.

    The file is untrusted input (see :func:`sadl_serialize.sadl_format.load` for the checks,
    ``device`` and ``mmap``). A nested object's integrity record is verified first (unless
    ``mmap=True``: the check would read every page); damage is a :class:`SadlFormatError`.
    """
    loaded = sadl_format.load(path, device, mmap=mmap)
    return _unwrap(loaded, os.fspath(path), verify=False if mmap else None)


def loads(data: bytes | bytearray | memoryview, device: str | Device | None = None) -> Any:
    """Read ``.sadl`` bytes from memory (what :func:`dumps` returns); as :func:`load`."""
    return _unwrap(sadl_format.loads(data, device), "<bytes>", verify=None)


def _entries(obj: Any) -> Any:
    """What the layout writes for ``obj``: itself when it is py-sadl's kind, else a document."""
    if sadl_format._is_arraylike(obj):
        return obj
    if isinstance(obj, Mapping) and all(
        isinstance(k, str) and sadl_format._is_arraylike(v) for k, v in obj.items()
    ):
        if OBJECT_KEY in obj:
            raise ValueError(
                f"cannot save a mapping with the key {OBJECT_KEY!r}: it is reserved for the "
                "document of a nested object; rename it"
            )
        return obj
    return object_entries(obj)


def _unwrap(loaded: Any, name: str, verify: bool | None) -> Any:
    if isinstance(loaded, dict) and next(iter(loaded), None) == OBJECT_KEY:
        return load_object(name, loaded, verify)
    return loaded
