"""Training checkpoints: model, optimizer, scheduler, step, RNG and extras in one ``.sadl`` file.

Every array of the training state becomes a tensor entry of the file (model weights under
``model.<name>``, optimizer moments under ``optimizer.state.<index>.<name>``, ...); everything
else (hyperparameters, step counters, the scheduler's state, the NumPy generator's state, user
extras) goes into one JSON document stored as a ``uint8`` tensor under the reserved key
``__meta__``. JSON keeps Python types exactly through small tags: tuples, non-string dict keys,
non-finite floats and NumPy scalars survive the round trip, so a resumed run is bit-identical.
Nothing is ever pickled: loading a checkpoint cannot execute code.

Integrity: the JSON document ends with an ``integrity`` record, the CRC32 of every tensor
entry's data (as stored: C-order little-endian bytes) and of the document itself without that
record. ``load_checkpoint`` verifies them, so bytes overwritten anywhere in the file (not only a
truncation) are a :class:`SadlFormatError` naming the file and the entry; ``verify=False``
skips it (``mmap=True`` does by default, since checking reads every page). The file stays a
plain ``.sadl`` file of format version 1, readable by py-sadl 2.0.0; checkpoints written before
this record existed load without the check.
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
from sadl_serialize.sadl_format import _host_array, load, read_index, save

__all__ = ["META_KEY", "load_checkpoint", "save_checkpoint"]

#: The entry holding the checkpoint's JSON document.
META_KEY = "__meta__"
_KIND = "sadl-checkpoint"
_WHAT = "sadl checkpoint"  # how errors name such a file
_CHECKPOINT_VERSION = 1
_INTEGRITY = "integrity"  # the last key of the JSON document: {"algorithm", "meta", "entries"}
_PARTS = ("model", "optimizer", "scheduler")
# JSON objects carrying one of these keys are tagged values, not plain dicts.
_TENSOR, _TUPLE, _FLOAT, _DICT = "__tensor__", "__tuple__", "__float__", "__dict__"
_TAGS = frozenset({_TENSOR, _TUPLE, _FLOAT, _DICT})


def save_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    step: int | None = None,
    rng: np.random.Generator | np.random.BitGenerator | None = None,
    extra: Any = None,
) -> None:
    """Write the whole training state to one ``.sadl`` file, atomically.

    ``model``, ``optimizer`` and ``scheduler`` are any objects with ``state_dict()`` (or such a
    state dict itself); ``step`` an int; ``rng`` a ``numpy.random.Generator`` (its bit
    generator's state is stored, e.g. ``sadl.default_generator()``); ``extra`` any value built
    from None, bools, numbers, strings, lists, tuples, dicts and arrays/Tensors. Each part is
    optional. A value that cannot be stored without pickling raises ``TypeError`` naming where
    it sits, before anything is written.
    """
    tensors: dict[str, Any] = {}
    meta: dict[str, Any] = {"format": _KIND, "version": _CHECKPOINT_VERSION}
    for part, obj in zip(_PARTS, (model, optimizer, scheduler)):
        if obj is not None:
            meta[part] = _encode(_state_of(obj, part), part, tensors)
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int | np.integer):
            raise TypeError(f"save_checkpoint: step must be an int, got {step!r}")
        meta["step"] = int(step)
    if rng is not None:
        meta["rng"] = _encode(_bit_generator(rng).state, "rng", tensors)
    if extra is not None:
        meta["extra"] = _encode(extra, "extra", tensors)
    host = {key: _host_array(value) for key, value in tensors.items()}  # the bytes written
    meta[_INTEGRITY] = {
        "algorithm": "crc32",
        "meta": zlib.crc32(_canonical(meta)),
        "entries": {key: _crc32(array) for key, array in host.items()},
    }
    document = _canonical(meta)
    entries = {META_KEY: np.frombuffer(document, dtype=np.uint8), **host}
    save(entries, path)


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    rng: np.random.Generator | np.random.BitGenerator | None = None,
    strict: bool = True,
    mmap: bool = False,
    verify: bool | None = None,
) -> dict[str, Any]:
    """Read a checkpoint and restore it into the objects given; returns everything it holds.

    The returned dict has the keys ``step`` and ``extra`` (None when not saved) and ``model``,
    ``optimizer``, ``scheduler``, ``rng`` (the stored state dicts, None when not saved). Each
    object passed is restored in place with ``load_state_dict`` (``model`` with ``strict``);
    ``rng``'s bit generator gets the saved state, so its next draws continue the saved run.
    Asking to restore a part the checkpoint lacks raises ``ValueError``; a file that is not a
    sadl checkpoint raises :class:`SadlFormatError`. Restoring is all or nothing: when one part
    refuses its state (a bad shape, a hyperparameter its optimizer's constructor would refuse),
    the error propagates and every object given is left as it was.

    The checksums saved with the checkpoint are verified first: data changed after it was
    written is a :class:`SadlFormatError` naming the file and the entry. ``mmap=True`` maps the
    tensors' data instead of reading it (see :func:`sadl_serialize.load`) and then skips the
    check, which would read every page; ``verify`` forces it on or off either way.
    """
    name = os.fspath(path)
    entries = load(path, mmap=mmap)
    if not isinstance(entries, dict) or META_KEY not in entries:
        raise SadlFormatError(
            name, None, f"it has no {META_KEY!r} entry (a plain .sadl file?)", format=_WHAT
        )
    meta_tensor = entries.pop(META_KEY)
    meta = _parse_meta(meta_tensor, name)
    integrity = meta.pop(_INTEGRITY, None)
    if integrity is not None and (not mmap if verify is None else verify):
        _verify(path, meta, integrity, entries)
    try:
        state = {
            key: _decode(meta.get(key), entries)
            for key in ("model", "optimizer", "scheduler", "rng", "extra")
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise SadlFormatError(
            name, None, f"corrupt checkpoint metadata: {exc}", format=_WHAT
        ) from None
    step = meta.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise SadlFormatError(
            name, None, f"corrupt checkpoint metadata: step is {step!r}", format=_WHAT
        )
    restores = []
    for part, obj in (("model", model), ("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is None:
            continue
        if state[part] is None:
            raise ValueError(
                f"load_checkpoint: {name} holds no {part} state (it was saved without {part}=)"
            )
        if not callable(getattr(obj, "load_state_dict", None)):
            raise TypeError(
                f"load_checkpoint: {part}= needs an object with load_state_dict(), got "
                f"{type(obj).__name__}"
            )
        restores.append((part, obj))
    generator = None
    if rng is not None:
        if state["rng"] is None:
            raise ValueError(f"load_checkpoint: {name} holds no rng state (saved without rng=)")
        generator = _bit_generator(rng)
        _check_rng_state(generator, state["rng"], name)
    _restore_all(restores, state, strict, generator)
    return {"step": step, **state}


def _restore_all(
    restores: list[tuple[str, Any]],
    state: dict[str, Any],
    strict: bool,
    generator: np.random.BitGenerator | None,
) -> None:
    """Restore every part, or none: a part that fails undoes the parts restored before it.

    Each ``load_state_dict`` of sadl's modules, optimizers and schedulers checks everything
    before it changes anything, so a part that refuses is as it was; the parts restored before
    it are undone from cheap snapshots (an optimizer's state and groups by reference, a
    scheduler's state dict, the generator's state). The model goes last, so its weights never
    need a backup copy.
    """
    order = sorted(restores, key=lambda item: item[0] == "model")
    undo: list[Any] = []
    try:
        for part, obj in order:
            restore = _snapshot(part, obj)
            if part == "model":
                obj.load_state_dict(state[part], strict=strict)
            else:
                obj.load_state_dict(state[part])
            undo.append(restore)  # a part that refuses its state is left as it was by itself
        if generator is not None:
            previous = generator.state
            undo.append(lambda: setattr(generator, "state", previous))
            generator.state = state["rng"]
    except BaseException:
        for restore in reversed(undo):
            restore()
        raise


def _snapshot(part: str, obj: Any) -> Any:
    """A function that puts ``obj`` back as it is now (see ``_restore_all``)."""
    groups = getattr(obj, "param_groups", None)
    if part == "optimizer" and isinstance(getattr(obj, "state", None), dict) and groups:
        saved_state, saved_groups = obj.state, [dict(g) for g in groups]

        def undo_optimizer() -> None:
            obj.state = saved_state
            for group, saved in zip(obj.param_groups, saved_groups):
                group.clear()
                group.update(saved)

        return undo_optimizer
    if part == "model":
        return lambda: None  # checked completely before anything is copied (see above)
    saved_dict = _deep_copy_state(obj.state_dict())
    return lambda: obj.load_state_dict(saved_dict)


def _deep_copy_state(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.data.copy()
    if is_array(value):
        return value.copy()
    if isinstance(value, Mapping):
        return {k: _deep_copy_state(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_deep_copy_state(v) for v in value)
    return value


def _check_rng_state(generator: np.random.BitGenerator, saved: Any, name: str) -> None:
    """Try the saved state on a scratch generator of the same kind first."""
    try:
        type(generator)().state = saved
    except (TypeError, ValueError, KeyError) as exc:
        kind = saved.get("bit_generator") if isinstance(saved, dict) else "?"
        raise ValueError(
            f"load_checkpoint: cannot restore the {kind} state saved in {name} into a "
            f"{type(generator).__name__}: {exc}"
        ) from None


def _state_of(obj: Any, part: str) -> Any:
    if isinstance(obj, Mapping):
        return obj
    state_dict = getattr(obj, "state_dict", None)
    if not callable(state_dict):
        raise TypeError(
            f"save_checkpoint: {part}= needs an object with state_dict() (or a state dict), got "
            f"{type(obj).__name__}"
        )
    return state_dict()


def _bit_generator(rng: Any) -> np.random.BitGenerator:
    if isinstance(rng, np.random.Generator):
        return rng.bit_generator
    if isinstance(rng, np.random.BitGenerator):
        return rng
    raise TypeError(
        f"rng must be a numpy.random.Generator (e.g. sadl.default_generator()), got "
        f"{type(rng).__name__}"
    )


def _parse_meta(meta_tensor: Tensor, name: str) -> dict[str, Any]:
    data = meta_tensor.numpy()
    if data.dtype != np.uint8 or data.ndim != 1:
        raise SadlFormatError(
            name, None, f"{META_KEY!r} must be a 1-d uint8 tensor of JSON", format=_WHAT
        )
    try:
        meta = loads_bounded(data.tobytes().decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SadlFormatError(
            name, None, f"{META_KEY!r} is not valid JSON: {exc}", format=_WHAT
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != _KIND:
        raise SadlFormatError(
            name, None, f"{META_KEY!r} does not describe a sadl checkpoint", format=_WHAT
        )
    if meta.get("version") != _CHECKPOINT_VERSION:
        raise SadlFormatError(
            name,
            None,
            f"checkpoint version {meta.get('version')!r} is not supported; this reader supports "
            f"version {_CHECKPOINT_VERSION}",
            format=_WHAT,
        )
    return meta


def _canonical(meta: dict[str, Any]) -> bytes:
    """The JSON document of ``meta`` (parsing it back and writing it again gives these bytes)."""
    return json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")


def _crc32(value: Any) -> int:
    """CRC32 of an entry's data as the file stores it (C-order little-endian bytes)."""
    return zlib.crc32(_host_array(value).reshape(-1).view(np.uint8).data)


def _verify(
    path: str | os.PathLike[str], meta: dict[str, Any], integrity: Any, entries: dict[str, Any]
) -> None:
    """Raise ``SadlFormatError`` unless every checksum ``save_checkpoint`` recorded matches."""
    name = os.fspath(path)
    expected = integrity.get("entries") if isinstance(integrity, dict) else None
    if not isinstance(expected, dict) or integrity.get("algorithm") != "crc32":
        raise SadlFormatError(name, None, "its checksum record is damaged", format=_WHAT)
    damaged = "changed after it was written (a damaged copy or disk?); restore it from a backup"
    if zlib.crc32(_canonical(meta)) != integrity.get("meta"):
        raise SadlFormatError(
            name,
            None,
            f"its metadata ({META_KEY!r}) fails its CRC32 check: it {damaged}",
            format=_WHAT,
        )
    if set(expected) != set(entries):
        odd = sorted(set(expected) ^ set(entries))[:3]
        raise SadlFormatError(
            name, None, f"its entries do not match its checksum record ({odd})", format=_WHAT
        )
    for key, tensor in entries.items():
        if _crc32(tensor) != expected[key]:
            start = next((i.offset for i in read_index(path) if i.key == key), "?")
            raise SadlFormatError(
                name,
                None,
                f"the data of entry {key!r} (from byte {start}) fails its CRC32 check: it "
                f"{damaged}",
                format=_WHAT,
            )


def _reject_constant(text: str) -> Any:
    raise ValueError(f"bare {text} is not JSON")


# ------------------------------------------------------------------ the tagged JSON encoding
def _encode(value: Any, path: str, tensors: dict[str, Any]) -> Any:
    """``value`` as JSON; arrays and Tensors go into ``tensors`` under a key made from ``path``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {_FLOAT: repr(value)}
    if isinstance(value, Tensor) or is_array(value) or isinstance(value, np.generic):
        key = path
        n = 1
        while key in tensors or key == META_KEY:
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
        return {_TUPLE: [_encode(v, f"{path}.{i}", tensors) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{path}.{i}", tensors) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and not _TAGS.intersection(value):
            return {k: _encode(v, f"{path}.{k}", tensors) for k, v in value.items()}
        return {
            _DICT: [
                [_encode_key(k, path), _encode(v, f"{path}.{k}", tensors)] for k, v in value.items()
            ]
        }
    raise TypeError(
        f"save_checkpoint: cannot store {path} ({type(value).__name__}): checkpoints hold "
        "Tensors, arrays, None, bools, numbers, strings, lists, tuples and dicts (never pickle)"
    )


def _encode_key(key: Any, path: str) -> Any:
    """A dict key that is not a string: a number, None, or a tuple of such."""
    if isinstance(key, np.generic):
        key = key.item()
    scratch: dict[str, Any] = {}
    encoded = _encode(key, f"{path}.<key>", scratch)
    if scratch:
        raise TypeError(f"save_checkpoint: {path} has an array or Tensor as a dict key")
    return encoded


def _decode(value: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
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
        return tuple(_decode(v, tensors) for v in value[_TUPLE])
    if _FLOAT in value:
        text = value[_FLOAT]
        if text not in ("nan", "inf", "-inf"):
            raise ValueError(f"bad float {text!r}")
        return float(text)
    if _DICT in value:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in value[_DICT]}
    return {k: _decode(v, tensors) for k, v in value.items()}
