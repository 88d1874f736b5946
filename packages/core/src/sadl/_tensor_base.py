"""The bottom of the autograd kernel: a Tensor's state, as ``_records`` is an op's.

``TensorBase`` holds the six slots every Tensor has; ``sadl.Tensor`` (``sadl._tensor``) adds the
method vocabulary and the protocols on top. The engine, backward, the backends and the NumPy
dispatch import this class directly (as MyGrad's ``tensor_base`` and tinygrad's ``Tensor`` are
imported), so inside them a tensor is a ``TensorBase``, not ``Any``. The engine fills the slots
(``sadl._engine.new_tensor``). The one thing this module cannot know is the class of an op's
result, which is defined above it: the subclass declared with
``class Tensor(TensorBase, result=True)`` is that class.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from sadl._engine import Node

__all__ = ["TRACING", "TensorBase", "seen", "told"]


class _Tracing(threading.local):
    """The tracer installed in this thread (set by ``sadl.backends.install_tracer``)."""

    tracer: Any = None


TRACING = _Tracing()
#: The number of threads with a tracer installed: 0 (nobody traces) is eager's one check.
watching = 0


def seen(obj: Any, name: str, value: Any) -> Any:
    """What a read of ``obj.name`` (holding ``value``) gets: the thread's tracer decides."""
    tracer = TRACING.tracer
    return value if tracer is None else tracer.on_read(obj, name, value)


def told(obj: Any, name: str, value: Any) -> Any:
    """``value``, about to be written to ``obj.name``, once the thread's tracer is told."""
    if TRACING.tracer is not None:
        TRACING.tracer.on_write(obj, name, value)
    return value


class TensorBase:
    """A Tensor's state: its array, its gradient, its producer node and its version counter."""

    __slots__ = (
        "__weakref__",
        "_data",
        "_grad",
        "_grad_hooks",
        "_node",
        "_requires_grad",
        "_version",
    )

    data: Any  #: the NumPy or CuPy array (a property of ``sadl.Tensor`` over ``_data``)
    grad: Any  #: the accumulated gradient or None (a property of ``sadl.Tensor`` over ``_grad``)
    _data: Any  #: the slot behind ``data``
    _grad: Any  #: the slot behind ``grad``
    _requires_grad: bool  #: read by the engine directly; set through ``Tensor.requires_grad``
    _node: Node | None  #: the engine's record of the op that produced this tensor (None: a leaf)
    _version: list[int]  #: bumped by every in-place write; shared by tensors viewing one memory
    _grad_hooks: dict[int, Any]  #: post-accumulate-grad hooks (unset until one is added)

    result_class: ClassVar[type[TensorBase]]  #: the class of op results (``sadl.Tensor``)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the data."""
        return self._data.shape  # type: ignore[no-any-return]

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of the data."""
        return self._data.dtype  # type: ignore[no-any-return]

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return self._data.ndim  # type: ignore[no-any-return]

    @property
    def is_leaf(self) -> bool:
        """True unless the tensor is the recorded result of an op."""
        return self._node is None

    @property
    def grad_fn(self) -> Node | None:
        """The graph node that produced this tensor (None for leaves)."""
        return self._node

    def __init_subclass__(cls, result: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if result:
            global _result
            TensorBase.result_class = _result = cls


_result: type = TensorBase  # TensorBase.result_class, which the engine reads without a class lookup
