"""Helpers shared by the op tables: argument checks with clear messages, and small rule pieces.

Every check names the function, the argument and what was expected, so a bad call fails at the
line that made it rather than deep inside NumPy.

A backward rule runs on arrays (first-order gradients) and on Tensors (``create_graph=True``),
and never has one path for each. A short rule is written in NumPy vocabulary and runs on both.
A fused op whose gradient deserves a fused pass uses *backward-as-op*: its rule only calls a
backward op (``gelu_backward``, ``layer_norm_backward``, ...). That op's forward always receives
plain arrays, so it may work in place, block by block; its own backward is written in NumPy
vocabulary (or calls the forward op again), so higher derivatives work too.

An op has one output. A backward op that computes several gradients in one pass returns them
back to back in one flat array (:func:`packed_empty`); the rule splits it again with
:func:`unpack`, which works on arrays (views, no copy) and on Tensors (differentiable slices).

Arrays may live on any device: what an op makes, it makes with the array module of its inputs
(``sadl.backends.array_module``), never with NumPy's host-only constructors.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import array_module, is_array

REDUCTIONS = ("mean", "sum", "none")


def const(value: Any) -> Any:
    """The array behind ``value`` (a Tensor's data), for quantities that need no gradient."""
    return value.data if isinstance(value, Tensor) else value


def packed_empty(like: Any, dtype: Any, *shapes: tuple[int, ...]) -> tuple[Any, list[Any]]:
    """A flat array (where ``like`` lives) with room for arrays of ``shapes`` back to back, and
    those arrays (views).
    """
    sizes = [math.prod(shape) for shape in shapes]
    flat = array_module(like).empty(sum(sizes), dtype=dtype)
    views: list[Any] = []
    start = 0
    for shape, size in zip(shapes, sizes):
        views.append(flat[start : start + size].reshape(shape))
        start += size
    return flat, views


def unpack(flat: Any, *shapes: tuple[int, ...] | None) -> list[Any]:
    """The arrays (or Tensors) of ``shapes`` stored back to back in ``flat``; None stays None."""
    parts: list[Any] = []
    start = 0
    for shape in shapes:
        if shape is None:
            parts.append(None)
            continue
        size = math.prod(shape)
        parts.append(flat[start : start + size].reshape(shape))
        start += size
    return parts


_HALF = np.dtype(np.float16)


def _is_half(value: Any) -> bool:
    # The dtype test first: it is the cheap one and almost always False (a Tensor has a dtype
    # too, hence is_array).
    return getattr(value, "dtype", None) == _HALF and is_array(value)


def in_float32(fn: Callable[..., Any] | None = None, *, promote: bool = False) -> Any:
    """``fn`` run with its float16 array arguments widened to float32, its result cast back.

    As torch's CPU kernels do for half precision: a norm's sum of squares or a mean of squared
    errors overflows float16 (largest value 65504) from |x| of about 256, and the tanh GELU's
    cubic from 40. Arrays of other dtypes, and Tensors (``create_graph=True``), pass unchanged.
    The result takes the dtype of the first float array argument (the input whose dtype a norm's
    output follows), or with ``promote`` (``@in_float32(promote=True)``) the promotion of all of
    them, as the op's own arithmetic would give. A result that is a tuple (the gradients of a
    backward rule) is returned as it is: the engine casts each gradient to its input's dtype.
    """
    if fn is None:
        return functools.partial(in_float32, promote=promote)
    op = fn

    @functools.wraps(op)
    def wrapped(*args: Any, **params: Any) -> Any:
        for a in args:  # _is_half inline, not any(genexpr): this runs on every fused op call
            if getattr(a, "dtype", None) == _HALF and is_array(a):
                break
        else:
            return op(*args, **params)
        floats = [a.dtype for a in args if is_array(a) and a.dtype.kind == "f"]
        dtype = np.result_type(*floats) if promote else floats[0]
        out = op(*(a.astype(np.float32) if _is_half(a) else a for a in args), **params)
        return out if isinstance(out, tuple) else out.astype(dtype, copy=False)

    return wrapped


def no_grad_rule(g, out, *inputs, **params):
    """Per-input rule for an input that never receives a gradient (integer ids, targets)."""
    return None


def shape_of(value: Any) -> tuple[int, ...]:
    """``value.shape`` as a tuple of Python ints."""
    if type(value) is np.ndarray:  # its shape is a tuple of ints already
        return value.shape  # type: ignore[no-any-return]
    shape = getattr(value, "shape", None)
    return tuple(int(n) for n in (np.shape(value) if shape is None else shape))


def check_reduction(fn: str, reduction: Any) -> None:
    """``reduction`` must be 'mean', 'sum' or 'none'."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{fn}: reduction must be one of 'mean', 'sum', 'none', got {reduction!r}")


def check_float(fn: str, arg: str, value: Any) -> None:
    """``value`` must be a floating-point array."""
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind != "f":
        got = dtype if dtype is not None else type(value).__name__
        hint = ""
        if getattr(dtype, "name", "") == "bfloat16":  # ml_dtypes' type: NumPy has no bfloat16
            hint = "; NumPy has no bfloat16 arithmetic: cast to float32 (exact) or float16"
        raise TypeError(f"{fn}: {arg} must be a floating-point array, got {got}{hint}")


def check_real(fn: str, arg: str, value: Any) -> None:
    """``value`` must be a floating-point or integer array (a uint8 image, say)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind not in "fiu":
        got = dtype if dtype is not None else type(value).__name__
        raise TypeError(f"{fn}: {arg} must be a floating-point or integer array, got {got}")


def lowest(dtype: Any) -> Any:
    """The smallest value of ``dtype``: -inf, or an integer type's minimum."""
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def check_int(fn: str, arg: str, value: Any, expected_shape: str = "") -> None:
    """``value`` must be an integer array (class ids, token ids)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        got = dtype if dtype is not None else type(value).__name__
        shape = f" of shape {expected_shape}" if expected_shape else ""
        raise TypeError(
            f"{fn}: {arg} must be an integer array{shape} (class or token ids), got {got}; "
            "cast with .astype(np.int64)"
        )


def check_same_shape(fn: str, arg: str, value: Any, expected: tuple[int, ...], what: str) -> None:
    """``value`` must have shape ``expected`` (described by ``what``)."""
    if shape_of(value) != tuple(expected):
        raise ValueError(
            f"{fn}: {arg} has shape {shape_of(value)}, expected {tuple(expected)} ({what})"
        )


def check_class_ids(
    fn: str, targets: Any, num_classes: int, ignore_index: int | None, leading: tuple[int, ...]
) -> None:
    """Integer targets of shape ``leading`` with values in ``[0, num_classes)`` or ignored."""
    check_int(fn, "targets", targets, str(leading))
    if shape_of(targets) != leading:
        raise ValueError(
            f"{fn}: targets has shape {shape_of(targets)}, expected {leading} (the input's "
            f"shape without its last, class axis of size {num_classes})"
        )
    if targets.size == 0:
        return
    # One boolean test, not the targets' values read into Python: under sadl.compile it is a
    # guard that every replay checks again, computed from the targets alone, so the replay
    # tests it before anything else runs (even after a BatchNorm counted the batch).
    bad = (targets < 0) | (targets >= num_classes)
    if ignore_index is not None:
        bad = bad & (targets != ignore_index)
    if bad.any():
        value = int(targets[bad].flat[0])
        raise ValueError(
            f"{fn}: targets holds class id {value}, expected ids in [0, {num_classes}) "
            f"(or ignore_index={ignore_index})"
        )


def reduce_loss(loss: Any, reduction: str, count: int | None = None) -> Any:
    """Apply ``reduction`` to per-element losses; ``count`` overrides the mean's divisor."""
    if reduction == "none":
        return loss
    xp = array_module(loss)
    total = np.sum(loss)  # a NumPy scalar on the host, a 0-d array on a device
    if reduction == "sum":
        return xp.asarray(total)
    n = loss.size if count is None else count
    if n == 0:
        return xp.full((), np.nan, dtype=loss.dtype)
    return xp.asarray(total / n)


def loss_scale(g: Any, reduction: str, count: int) -> Any:
    """The upstream gradient of a reduced loss, per element: g / count for a mean, else g.

    A mean over nothing (no elements, or every target ignored) is NaN, but its gradient is 0, as
    in torch: no element contributed, and a NaN factor would poison even the empty gradients.
    """
    if reduction == "mean":
        return g * (1.0 / count) if count else g * 0.0
    return g


#: Elements per block of a blockwise kernel: a block and its scratch buffers stay in the L2
#: cache, so a chain of NumPy calls on a block costs far less than the same chain on the whole
#: array (which streams every temporary through main memory).
BLOCK = 16384


def blockwise(kernel: Any, *arrays: Any, scratch: int = 1, block: int = BLOCK) -> Any:
    """``kernel(out, *blocks, *scratch_buffers)`` over cache-sized blocks of same-shape arrays.

    ``kernel`` writes its result into ``out`` in place (NumPy ``out=`` calls); ``scratch``
    buffers of the block's size are allocated once and reused for every block. A kernel that
    calls an op per block (with a fixed cost per call) may ask for larger blocks. On a device
    (CuPy) the whole array is one block: a GPU wants few large kernels, not a Python loop.
    """
    first = arrays[0]
    xp = array_module(first)
    flats = [xp.ascontiguousarray(a).reshape(-1) for a in arrays]
    out = xp.empty(first.size, dtype=first.dtype)
    n = out.size
    if xp.__name__ != "numpy":  # a device (a tracer hands out a recording NumPy)
        block = max(n, 1)
    size = min(block, max(n, 1))
    buffers = [xp.empty(size, dtype=first.dtype) for _ in range(scratch)]
    for start in range(0, n, block):
        stop = min(start + block, n)
        m = stop - start
        kernel(out[start:stop], *(f[start:stop] for f in flats), *(b[:m] for b in buffers))
    return out.reshape(first.shape)


def summed(parts: Any) -> Any:
    """The parts added in order, ``((p0 + p1) + p2) + ...`` (blocks' partial sums: the same
    bits whatever adds them, as long as the blocks are the same).
    """
    return functools.reduce(operator.add, parts)
