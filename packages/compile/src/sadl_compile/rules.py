"""What the tracer must know about NumPy functions: which write into their arguments, which only
look at shapes, which return data-dependent shapes, which return plain metadata.

Calls are known by their *key*: the NumPy function, ufunc method or ndarray method they stand
for, whatever runs on replay (a device backend's own function records NumPy's as its key).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor, backends
from sadl.plugins import records

from sadl_compile.ir import Value, iter_values
from sadl_compile.traced import WRITING_METHODS

__all__ = [
    "METADATA",
    "SHAPE_ONLY",
    "dynamic_shape",
    "eager_product",
    "has_tensor",
    "is_tensor",
    "written",
]

_ndarray = np.ndarray

#: Functions whose result is plain metadata (shapes, dtypes), computed on the spot, not recorded.
METADATA = frozenset(
    f
    for f in (
        np.shape,
        np.ndim,
        np.size,
        np.result_type,
        np.may_share_memory,
        np.shares_memory,
        np.iscomplexobj,
        np.isrealobj,
        np.isfortran,
        np.can_cast,
        np.min_scalar_type,
    )
)

#: Functions that read only the shape and dtype of their array arguments, not their values.
SHAPE_ONLY = frozenset({np.zeros_like, np.ones_like, np.empty_like})

#: Functions that write into their first argument.
_WRITERS = frozenset({np.copyto, np.put, np.putmask, np.place, np.put_along_axis, np.fill_diagonal})

#: Functions whose result's shape depends on the values of their inputs.
_DYNAMIC = frozenset(
    {
        np.nonzero,
        np.flatnonzero,
        np.argwhere,
        np.unique,
        np.compress,
        np.extract,
        np.union1d,
        np.intersect1d,
        np.setdiff1d,
        np.trim_zeros,
        _ndarray.nonzero,
        _ndarray.compress,
    }
)


def written(key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Value, ...]:
    """The values (leaves of the templates) whose memory the call ``key`` writes into."""
    found: list[Value] = []
    out = kwargs.get("out")
    if out is not None:
        found.extend(iter_values(out))
    first = args[0] if args and type(args[0]) is Value else None
    if first is not None:
        ufunc_at = isinstance(key, tuple) and key[1] == "at"
        writer = key in WRITING_METHODS or key in _WRITERS
        swapped = key is _ndarray.byteswap and kwargs.get("inplace", args[1:2] == (True,))
        if ufunc_at or writer or swapped:
            found.append(first)
    return tuple(dict.fromkeys(found))


#: Functions declared ``sadl.backends.value_dependent``, recorded whole (added as they are seen).
VALUE_DEPENDENT: set[Any] = set()


def dynamic_shape(key: Any, reads: list[Value], nargs: int | None = None) -> bool:
    """Whether the call's result has a shape that depends on the values it reads (``nargs``:
    how many positional arguments it was given, arrays or not).
    """
    if isinstance(key, tuple):
        return False
    if key in _DYNAMIC or key in VALUE_DEPENDENT:
        return True
    if key is _ndarray.__getitem__:
        return any(v.dtype == np.bool_ and v.shape for v in reads[1:])
    if key is np.where:  # np.where(cond) is nonzero; np.where(cond, 0.0, -inf) is elementwise
        return (len(reads) if nargs is None else nargs) == 1
    return False


def is_tensor(value: Any) -> bool:
    """True for a ``sadl.Tensor``."""
    return isinstance(value, Tensor)


def has_tensor(items: Any) -> bool:
    """Whether a Tensor is among ``items`` (or inside a list or tuple among them)."""
    if not isinstance(items, tuple | list):
        items = (items,)
    for item in items:
        if is_tensor(item):
            return True
        if isinstance(item, tuple | list) and any(is_tensor(x) for x in item):
            return True
    return False


def eager_product(func: Any) -> Any:
    """What eager runs for the NumPy product ``func``, on the BLAS threads its size calls for:
    ``sadl.backends.matmul`` for ``np.matmul``, the forward of the op serving ``np.tensordot``
    (sadl-layers': ``on_threads`` with its multiply-adds) for that. The tracer runs it and the
    replay calls it, so a folded or replayed product has eager's bits. Anything else: ``func``.
    """
    if func is np.matmul:
        return backends.matmul
    if func is np.tensordot:
        for op in records("ops").values():
            if np.tensordot in op.numpy_funcs:
                forward = op.forward
                return lambda a, b, axes=2: forward(a, b, axes=axes)
    return func
