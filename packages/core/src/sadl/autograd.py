"""``sadl.autograd``: PyTorch's ``torch.autograd.Function`` contract, built on ``OpDef``.

A subclass writes ``@staticmethod forward(ctx, *args)`` and ``@staticmethod backward(ctx,
*grads)`` on Tensors and is called as ``MyFn.apply(*args)``. Each subclass is one ``OpDef`` (its
inputs are the Tensor arguments), so the engine records it like any op: ``sadl.testing.gradcheck``
checks it and, when ``backward`` is written with Tensor operations, double backward works
(``create_graph=True``). Tensors saved with ``ctx.save_for_backward`` that are inputs or the
output come back in backward as the graph's own tensors, as in torch.

>>> import numpy as np, sadl
>>> class RoundSTE(sadl.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         return np.round(x)
...     @staticmethod
...     def backward(ctx, grad):
...         return grad
>>> x = sadl.tensor([0.6, 1.4], requires_grad=True)
>>> RoundSTE.apply(x).sum().backward()
>>> x.grad
array([1., 1.], dtype=float32)
"""

from __future__ import annotations

from typing import Any, ClassVar

from sadl._engine import apply as _apply
from sadl._engine import new_tensor
from sadl._grad_mode import _state as _grad_state
from sadl._grad_mode import no_grad
from sadl._records import OpDef
from sadl._tensor_base import TensorBase

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """The ``ctx`` of a :class:`Function`: what ``forward`` leaves for ``backward``.

    ``needs_input_grad`` has one bool per argument of ``apply`` (False for non-Tensors).
    Any other attribute may be set on it freely (``ctx.scale = 2.0``).
    """

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved: tuple[Any, ...] = ()
        self._resolved: tuple[Any, ...] | None = None
        self._inputs: tuple[Any, ...] = ()
        self._output: Any = None

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep Tensors (or None) for ``backward``; read them back as ``ctx.saved_tensors``."""
        for t in tensors:
            if t is not None and not isinstance(t, TensorBase):
                raise TypeError(
                    "save_for_backward takes Tensors or None, got "
                    f"{type(t).__name__}; keep other values as attributes (ctx.value = ...)"
                )
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """What ``save_for_backward`` kept: inputs and the output as the graph's tensors."""
        return self._saved if self._resolved is None else self._resolved

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` may receive None for an output gradient (never here:
        sadl's Functions have one output, whose gradient always exists).
        """
        self.materialize_grads = value

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """Refused: a sadl Function has one differentiable output."""
        raise NotImplementedError(
            "sadl.autograd.Function has one differentiable output; compute a "
            "non-differentiable result under sadl.no_grad() outside the Function"
        )


class Function:
    """Base class of custom differentiable operations (PyTorch's ``torch.autograd.Function``).

    Subclasses define ``forward`` and ``backward`` as staticmethods (or ``forward(*args)`` plus
    ``setup_context(ctx, inputs, output)``, torch 2's form). ``forward`` runs without recording
    a graph and returns one Tensor; ``backward`` gets one gradient and returns one gradient (or
    None) per argument of ``apply``. Keyword arguments are not part of the contract (as in torch).
    """

    _op: ClassVar[OpDef]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("forward", "backward", "setup_context"):
            member = cls.__dict__.get(name)
            if member is not None and not isinstance(member, staticmethod):
                raise TypeError(
                    f"{cls.__name__}.{name} must be a @staticmethod (PyTorch's contract: "
                    f"{name}(ctx, ...) receives the context as its first argument)"
                )
        cls._op = OpDef(cls.__name__, _forward_rule(cls), _backward_rule(cls))

    def __init__(self) -> None:
        raise TypeError(
            f"{type(self).__name__} is not instantiated: call {type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        """The forward pass on Tensors (define it in a subclass)."""
        raise NotImplementedError("a sadl.autograd.Function subclass defines forward()")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        """The gradient of each argument of ``apply`` (define it in a subclass)."""
        raise NotImplementedError("a sadl.autograd.Function subclass defines backward()")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[Any, ...], output: Any) -> None:
        """Torch 2's split form: save what backward needs from ``inputs`` and ``output``."""

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run the Function on ``args``; Tensor arguments are its differentiable inputs."""
        if kwargs:
            raise TypeError(
                f"{cls.__name__}.apply takes positional arguments only (as torch's): got "
                f"{sorted(kwargs)}"
            )
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, TensorBase))
        enabled = _grad_state.enabled
        ctx = FunctionCtx(
            tuple(isinstance(a, TensorBase) and enabled and a._requires_grad for a in args)
        )
        ctx._inputs = args
        tensors = [args[i] for i in positions]
        if not tensors:
            return _run_forward(cls, ctx, args)
        return _apply(cls._op, tensors, {"ctx": ctx})


def _split_form(cls: type[Function]) -> bool:
    return any("setup_context" in vars(c) for c in cls.__mro__ if c is not Function)


def _run_forward(cls: type[Function], ctx: FunctionCtx, args: tuple[Any, ...]) -> Any:
    with no_grad():
        if _split_form(cls):
            out = cls.forward(*args)
            cls.setup_context(ctx, args, out)
        else:
            out = cls.forward(ctx, *args)
    if isinstance(out, tuple | list):
        raise NotImplementedError(
            f"{cls.__name__}.forward returned {len(out)} values; sadl.autograd.Function has "
            "one output Tensor (write one Function per output, or concatenate them)"
        )
    ctx._output = out
    return out


def _forward_rule(cls: type[Function]) -> Any:
    def forward(*arrays: Any, ctx: FunctionCtx) -> Any:
        args = list(ctx._inputs)
        positions = [i for i, a in enumerate(args) if isinstance(a, TensorBase)]
        for i, data in zip(positions, arrays):
            args[i] = new_tensor(data)  # the Function's own view of the input, off the graph
        ctx._inputs = tuple(args)
        out = _run_forward(cls, ctx, ctx._inputs)
        return out.data if isinstance(out, TensorBase) else out

    forward.__doc__ = cls.__doc__
    return forward


def _backward_rule(cls: type[Function]) -> Any:
    def backward(grad: Any, out: Any, *inputs: Any, ctx: FunctionCtx) -> tuple[Any, ...]:
        on_graph = isinstance(grad, TensorBase)  # create_graph=True: Tensors in, Tensors out
        args = ctx._inputs
        positions = [i for i, a in enumerate(args) if isinstance(a, TensorBase)]
        by_id = {id(args[i]): _as_tensor(x) for i, x in zip(positions, inputs)}
        by_id[id(ctx._output)] = _as_tensor(out)
        ctx._resolved = tuple(None if t is None else by_id.get(id(t), t) for t in ctx._saved)
        try:
            if on_graph:
                grads = cls.backward(ctx, grad)
            else:
                with no_grad():
                    grads = cls.backward(ctx, new_tensor(grad))
        finally:
            ctx._resolved = None
        if not isinstance(grads, tuple):
            grads = (grads,)
        if len(grads) != len(args):
            raise RuntimeError(
                f"{cls.__name__}.backward returned {len(grads)} gradients; expected one per "
                f"argument of apply ({len(args)}), None for those without one"
            )
        picked = [grads[i] for i in positions]
        if on_graph:
            return tuple(picked)
        return tuple(g.data if isinstance(g, TensorBase) else g for g in picked)

    return backward


def _as_tensor(value: Any) -> Any:
    return value if isinstance(value, TensorBase) else new_tensor(value)
