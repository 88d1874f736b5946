"""Training checkpoints: model, optimizer, scheduler, step, RNG and extras in one ``.sadl`` file.

Every array of the training state becomes a tensor entry of the file (model weights under
``model.<name>``, optimizer moments under ``optimizer.state.<index>.<name>``, ...); everything
else (hyperparameters, step counters, the scheduler's state, the NumPy generator's state, user
extras) goes into one JSON document stored as a ``uint8`` tensor under the reserved key
``__meta__`` (see :mod:`sadl_serialize.metadata`: tagged values, so a resumed run is
bit-identical, and an integrity record). Nothing is ever pickled: loading a checkpoint cannot
execute code.

Integrity: the record covers the document, every entry's key, dtype and shape and every data
byte. ``load_checkpoint`` verifies it, so bytes overwritten anywhere in the file (not only a
truncation) are a :class:`SadlFormatError` naming the file and the entry; ``verify=False``
skips it (``mmap=True`` does by default, since checking reads every page). The file stays a
plain ``.sadl`` file of format version 1, readable by py-sadl 2.0.0; checkpoints written by an
older sadl-serialize, before the record existed, load without the check (``verify=True``
refuses them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import is_array

from sadl_serialize.errors import SadlFormatError
from sadl_serialize.metadata import (
    META_KEY,
    OBJECT_KEY,
    decode,
    document_entries,
    encode,
    read_document,
)
from sadl_serialize.sadl_format import load_entries, save

__all__ = ["META_KEY", "load_checkpoint", "save_checkpoint"]

_KIND = "sadl-checkpoint"
_WHAT = "sadl checkpoint"  # how errors name such a file
_PARTS = ("model", "optimizer", "scheduler")
_FIELDS = frozenset({*_PARTS, "step", "rng", "extra"})
_WHO = "save_checkpoint"


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
    meta: dict[str, Any] = {"format": _KIND}
    for part, obj in zip(_PARTS, (model, optimizer, scheduler)):
        if obj is not None:
            meta[part] = encode(_state_of(obj, part), part, tensors, _WHO)
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int | np.integer):
            raise TypeError(f"save_checkpoint: step must be an int, got {step!r}")
        meta["step"] = int(step)
    if rng is not None:
        meta["rng"] = encode(_bit_generator(rng).state, "rng", tensors, _WHO)
    if extra is not None:
        meta["extra"] = encode(extra, "extra", tensors, _WHO)
    save(document_entries(META_KEY, meta, tensors), path)


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

    The integrity record saved with the checkpoint is verified first: a key, dtype, shape or
    data byte changed after it was written is a :class:`SadlFormatError` naming the file and
    the entry. ``mmap=True`` maps the tensors' data instead of reading it (see
    :func:`sadl_serialize.load`) and then skips the check, which would read every page;
    ``verify`` forces it on or off either way (``verify=True`` refuses a checkpoint of an older
    sadl-serialize, which has no record to verify).
    """
    name = os.fspath(path)
    entries = load_entries(path, mmap=mmap)
    if META_KEY not in entries:
        hint = (
            "it holds an object saved with sadl.save: read it with sadl.load"
            if OBJECT_KEY in entries
            else f"it has no {META_KEY!r} entry (a plain .sadl file?)"
        )
        raise SadlFormatError(name, None, hint, format=_WHAT)
    check = (False if mmap else None) if verify is None else verify
    meta = read_document(path, META_KEY, _KIND, _FIELDS, entries, check, _WHAT)
    try:
        state = {
            key: decode(meta.get(key), entries)
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
