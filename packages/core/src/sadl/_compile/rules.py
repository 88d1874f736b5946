"""What the tracer must know about NumPy functions: which write into their arguments, which only
look at shapes, which return data-dependent shapes, which return plain metadata.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl._compile.ir import Value, iter_values
from sadl._compile.traced import WRITING_METHODS
from sadl._engine import is_tensor

__all__ = ["METADATA", "SHAPE_ONLY", "dynamic_shape", "is_tensor", "written"]

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


def written(
    func: Any, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Value, ...]:
    """The values (leaves of the templates) whose memory the call writes into."""
    found: list[Value] = []
    out = kwargs.get("out")
    if out is not None:
        found.extend(iter_values(out))
    first = args[0] if args and type(args[0]) is Value else None
    if first is not None:
        ufunc_at = isinstance(key, tuple) and key[1] == "at"
        writer = func in WRITING_METHODS or func in _WRITERS
        swapped = func is _ndarray.byteswap and kwargs.get("inplace", args[1:2] == (True,))
        if ufunc_at or writer or swapped:
            found.append(first)
    return tuple(dict.fromkeys(found))


def dynamic_shape(func: Any, key: Any, reads: list[Value]) -> bool:
    """Whether the call's result has a shape that depends on the values it reads."""
    if func in _DYNAMIC:
        return True
    if func is _ndarray.__getitem__:
        return any(v.dtype == np.bool_ and v.shape for v in reads[1:])
    if func is np.where:
        return len(reads) == 1
    return False
