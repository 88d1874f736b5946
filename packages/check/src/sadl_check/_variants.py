"""OpInfo-style variants of an op's examples, derived by ``sadl_check.check_op`` itself.

An op's examples show a few calls; the calls users make differ from them in ways that break ops
again and again: negative axes, 0-d inputs, an empty dimension, inputs that are not contiguous
in memory (strided, transposed), broadcasting. From each materialized example (float64 arrays
and constants) this module derives those calls. A derived call that the op's forward refuses on
plain arrays, or that gives non-finite values there, is not a valid call of the op and is left
out: a variant tests that what works without autograd also works, with the right gradient, with
it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Variant", "derive_variants", "outputs_of"]

#: Params that name axes, made negative by the "negative axes" variant.
AXIS_PARAMS = ("axis", "axes", "axis1", "axis2", "source", "destination", "dim")


@dataclass
class Variant:
    """One derived call: what changed (``kind``), its inputs and params.

    ``same_values`` marks variants whose inputs hold the example's values in another memory
    layout: their outputs must equal the example's exactly as computed from contiguous inputs.
    """

    kind: str
    inputs: list[Any]
    params: dict[str, Any]
    same_values: bool = False
    reference: list[Any] = field(default_factory=list)


def _is_float_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def outputs_of(result: Any) -> list[Any]:
    """The array outputs of a call (a list or tuple of them, or one)."""
    if isinstance(result, list | tuple):
        found: list[Any] = []
        for r in result:
            found.extend(outputs_of(r))
        return found
    return [result]


def _runs_finite(
    call: Callable[..., Any], inputs: Sequence[Any], params: dict[str, Any]
) -> list[Any] | None:
    """The outputs of ``call`` on plain arrays, or None when it raises or gives inf/nan.

    When every float input is empty, inf and nan are fine (NumPy's mean of nothing is nan):
    there is nothing to compare numerically, and the backward must still run.
    """
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = outputs_of(call(*inputs, **params))
    except Exception:
        return None
    all_empty = all(x.size == 0 for x in inputs if _is_float_array(x))
    for o in outs:
        arr = np.asarray(o)
        if arr.dtype.kind in "fc" and not np.isfinite(arr).all() and not all_empty:
            return None
    return [np.array(o, copy=True) for o in outs]


def _strided(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The values of ``x`` in every other element of a buffer twice as long (a strided view)."""
    buffer = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
    view = buffer[..., ::2]
    view[...] = x
    return view


def _negative_axes(params: dict[str, Any], ndim: int) -> dict[str, Any] | None:
    """Axis params counted from the end: a single axis, and every other axis of a tuple.

    Mixing signs in a tuple matters: ``argsort((-1, 0, 1))`` is not the inverse permutation of
    ``(2, 0, 1)`` while ``argsort((-1, -3, -2))`` happens to be.
    """
    changed = dict(params)
    found = False
    for name in AXIS_PARAMS:
        value = params.get(name)
        if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0:
            changed[name] = int(value) - max(ndim, 1)
            found = True
        elif (
            isinstance(value, tuple | list)
            and value
            and all(isinstance(a, int | np.integer) for a in value)
        ):
            flipped = _flip_every_other(value, ndim, 0)
            if np.array_equal(np.argsort(flipped), np.argsort(value)):
                flipped = _flip_every_other(value, ndim, 1)  # make the order change if it can
            changed[name] = type(value)(flipped)
            found = found or flipped != list(value)
    return changed if found else None


def _flip_every_other(axes: Sequence[Any], ndim: int, start: int) -> list[int]:
    return [int(a) - ndim if k % 2 == start and a >= 0 else int(a) for k, a in enumerate(axes)]


def _zero_d(inputs: list[Any], params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    zero = [np.array(x.reshape(-1)[0]) if _is_float_array(x) and x.size else x for x in inputs]
    changed = dict(params)
    for name in AXIS_PARAMS:
        if isinstance(params.get(name), int | np.integer):
            changed[name] = -1
    return zero, changed


def _empty_candidates(inputs: list[Any]) -> list[list[Any]]:
    """Ways to give the float inputs an empty dimension, most broadcast-friendly first."""
    floats = [i for i, x in enumerate(inputs) if _is_float_array(x) and x.ndim >= 1]
    if not floats:
        return []
    top = max(inputs[i].ndim for i in floats)

    def emptied(which: list[int], axis: int) -> list[Any]:
        out = list(inputs)
        for i in which:
            shape = list(inputs[i].shape)
            shape[axis] = 0
            out[i] = np.zeros(shape)
        return out

    return [
        emptied([i for i in floats if inputs[i].ndim == top], 0),
        emptied(floats[:1], 0),
        emptied(floats, -1),
    ]


def derive_variants(
    call: Callable[..., Any], inputs: list[Any], params: dict[str, Any]
) -> list[Variant]:
    """The valid variants of one example (see the module docstring)."""
    reference = _runs_finite(call, inputs, params)
    if reference is None:
        return []
    arrays = [x for x in inputs if isinstance(x, np.ndarray)]
    floats = [i for i, x in enumerate(inputs) if _is_float_array(x)]
    candidates: list[Variant] = []

    negative = _negative_axes(params, arrays[0].ndim if arrays else 0)
    if negative is not None:
        candidates.append(Variant("negative axes", list(inputs), negative))
    if any(inputs[i].ndim for i in floats):
        zero, zero_params = _zero_d(inputs, params)
        candidates.append(Variant("0-d inputs", zero, zero_params))
    for emptied in _empty_candidates(inputs):
        if _runs_finite(call, emptied, params) is not None:
            candidates.append(Variant("empty dimension", emptied, dict(params)))
            break
    if any(inputs[i].ndim >= 1 for i in floats):
        strided = [_strided(x) if i in floats and x.ndim >= 1 else x for i, x in enumerate(inputs)]
        candidates.append(Variant("strided inputs", strided, dict(params), True, reference))
    if any(inputs[i].ndim >= 2 for i in floats):
        fortran = [
            np.asfortranarray(x) if i in floats and x.ndim >= 2 else x for i, x in enumerate(inputs)
        ]
        candidates.append(Variant("transposed inputs", fortran, dict(params), True, reference))
    if len(floats) >= 2:
        last = floats[-1]
        x = inputs[last]
        if x.ndim >= 1 and x.shape[0] > 1:
            squeezed = list(inputs)
            squeezed[last] = np.array(x[:1])
            outs = _runs_finite(call, squeezed, params)
            if outs is not None and [o.shape for o in outs] == [r.shape for r in reference]:
                candidates.append(Variant("broadcast input", squeezed, dict(params)))

    return [v for v in candidates if _runs_finite(call, v.inputs, v.params) is not None]
