"""PyTorch's own spellings on the Tensor, with PyTorch's signatures: ``t.size(0)``, ``t.numel()``,
``t.dim()``, ``t.t()``, ``t.masked_fill(mask, v)``, ``t.split(2, dim=1)``, ``t.chunk(3)``, ...

A mixin of ``sadl._tensor.Tensor`` like the families of ``sadl._methods``; each method is made of
the ops those call, so gradients and NumPy dispatch come with them. Where NumPy has the same
name with another meaning, NumPy's stays (``t.size`` is the element count, an int that torch's
``t.size()`` and ``t.size(dim)`` can also call; ``repeat`` is ``np.repeat``).
"""

from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING, Any, Protocol

from sadl._engine import apply as _apply
from sadl._engine import new_tensor
from sadl._methods import TensorLike, _shape_args
from sadl._ops import indexing as _ix
from sadl._ops import linalg as _la
from sadl._ops import nondifferentiable as _nd
from sadl.backends import array_module

if TYPE_CHECKING:
    from sadl._tensor import Tensor

__all__ = ["Size", "TorchMethods"]


class _Tensor(TensorLike, Protocol):
    def transpose(self, *axes: Any) -> Tensor: ...
    def copy(self) -> Tensor: ...


class Size(builtins.int):
    """``t.size``: the number of elements (NumPy's), callable as torch's ``t.size(dim=None)``.

    >>> import sadl
    >>> t = sadl.zeros((2, 3))
    >>> t.size, t.size(), t.size(-1)
    (6, (2, 3), 3)
    """

    shape: tuple[builtins.int, ...]

    def __new__(cls, shape: tuple[builtins.int, ...]) -> Size:
        size = super().__new__(cls, math.prod(shape))
        size.shape = tuple(shape)
        return size

    def __call__(self, dim: builtins.int | None = None) -> Any:
        """The shape (torch's ``size()``), or the length of axis ``dim``."""
        return self.shape if dim is None else self.shape[dim]

    def __reduce__(self) -> Any:
        return (builtins.int, (builtins.int(self),))  # pickled and copied as the plain count


class TorchMethods:
    """PyTorch's names for what a Tensor does (``numel``, ``masked_fill``, ``split``, ...)."""

    __slots__ = ()

    @property
    def size(self: _Tensor) -> Size:
        """Number of elements; ``t.size()`` is the shape and ``t.size(d)`` one axis (torch's)."""
        return Size(self.data.shape)

    def numel(self: _Tensor) -> builtins.int:
        """Number of elements (torch's name)."""
        return builtins.int(self.data.size)

    def dim(self: _Tensor) -> builtins.int:
        """Number of axes (torch's name)."""
        return self.ndim

    def t(self: _Tensor) -> Tensor:
        """The transpose of a matrix; a 0-d or 1-d tensor as it is (torch's ``t``)."""
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor of at most 2 dimensions, got {self.ndim}")
        return self.transpose()

    def contiguous(self: _Tensor) -> Tensor:
        """This tensor if its data is C-contiguous, else a contiguous copy (differentiable)."""
        return self.copy() if not self.data.flags.c_contiguous else self  # type: ignore[return-value]

    def masked_fill(self: _Tensor, mask: Any, value: Any) -> Tensor:
        """``value`` where ``mask`` is true, else this tensor's values (torch's masked_fill)."""
        out = _apply(_ix.WHERE, (mask, value, self), {})
        return out if out.dtype == self.dtype else out.astype(self.dtype)

    def where(self: _Tensor, condition: Any, other: Any) -> Tensor:
        """This tensor's values where ``condition`` holds, else ``other`` (torch's method)."""
        return _apply(_ix.WHERE, (condition, self, other), {})

    def split(self: _Tensor, split_size: Any, dim: builtins.int = 0) -> tuple[Tensor, ...]:
        """Pieces along ``dim``: of ``split_size`` each (the last may be shorter), or of the
        sizes in a list (torch's ``split``, not ``np.split``).
        """
        n = self.shape[dim]
        if isinstance(split_size, builtins.int):
            if split_size <= 0:
                raise ValueError(f"split: split_size must be positive, got {split_size}")
            sizes = [min(split_size, n - start) for start in range(0, n, split_size)] or [0]
        elif sum(split_size) != n:
            raise ValueError(f"split: sizes {list(split_size)} do not add up to {n} (dim {dim})")
        else:
            sizes = list(split_size)
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        lead = (slice(None),) * (dim % self.ndim)
        return tuple(self[(*lead, slice(a, a + k))] for a, k in zip(starts, sizes))

    def chunk(self: _Tensor, chunks: builtins.int, dim: builtins.int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` pieces along ``dim``, of equal size but the last (torch's chunk)."""
        if chunks <= 0:
            raise ValueError(f"chunk: chunks must be positive, got {chunks}")
        return TorchMethods.split(self, max(-(-self.shape[dim] // chunks), 1), dim)

    def type_as(self: _Tensor, other: Any) -> Tensor:
        """This tensor cast to ``other``'s dtype."""
        return self.astype(other.dtype)

    def view_as(self: _Tensor, other: Any) -> Tensor:
        """This tensor reshaped to ``other``'s shape."""
        return self.reshape(other.shape)

    def new_zeros(self: _Tensor, *size: Any, dtype: Any = None) -> Tensor:
        """Zeros of ``size`` with this tensor's dtype (or ``dtype``) and device."""
        return new_tensor(array_module(self.data).zeros(_shape_args(size), dtype or self.dtype))

    def eq(self: _Tensor, other: Any) -> Tensor:
        """Elementwise ``self == other`` (a boolean tensor)."""
        return _apply(_nd.EQUAL, (self, other), {})

    def bmm(self: _Tensor, other: Any) -> Tensor:
        """A batch of matrix products: ``(b, n, k) @ (b, k, m)`` (torch's ``bmm``)."""
        if self.ndim != 3 or getattr(other, "ndim", None) != 3:
            raise ValueError("bmm: both tensors must be 3-d (batch, rows, columns)")
        return _apply(_la.MATMUL, (self, other), {})
