"""The op record, ``OpDef``, and its sample calls, ``Example``: what the autograd kernel runs.

A plugin returns them from ``register_ops``; the other records (layers, optimizers, models,
formats, device backends) are in ``sadl._plugin_records``. Each record is plain data: the registry
validates it, the namespaces (``sadl.ops``, ...) serve it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Example", "OpDef", "install_op_caller"]

#: ``backward(grad, out, *inputs, **params) -> tuple`` with one gradient (or None) per input,
#: or one such callable per input that returns only that input's gradient.
BackwardRule = Callable[..., Any] | tuple[Callable[..., Any], ...]


class Example:
    """One sample call of an op, used by ``sadl.testing.check_op`` and the registry-wide tests.

    Positional ``inputs`` become the op's inputs: a tuple of ints is a *shape* (filled with random
    float64 values drawn from ``domain``) and a floating NumPy array is used as given; both are
    differentiated. Anything else (integer or boolean arrays, strings, Python numbers) is passed
    through as a constant. Keyword arguments are the op's params.
    """

    __slots__ = ("domain", "inputs", "params")

    def __init__(
        self, *inputs: Any, domain: tuple[float, float] = (-2.0, 2.0), **params: Any
    ) -> None:
        self.inputs = inputs
        self.params = params
        self.domain = domain

    def __repr__(self) -> str:
        parts = [_short_repr(x) for x in self.inputs]
        parts += [f"{k}={_short_repr(v)}" for k, v in self.params.items()]
        return f"Example({', '.join(parts)})"


def _short_repr(value: Any) -> str:
    shape = None if isinstance(value, type) else getattr(value, "shape", None)
    if shape is not None and getattr(value, "size", 0) > 4:
        return f"array{tuple(shape)}"
    return repr(value)


@dataclass(frozen=True, eq=False)
class OpDef:
    """A differentiable operation: forward and backward side by side, in NumPy vocabulary.

    ``forward(*inputs, **params) -> array`` receives plain arrays (NumPy or CuPy). ``backward(grad,
    out, *inputs, **params)`` returns one gradient (or None) per input, shaped like the broadcast
    output: the engine sums over broadcast axes and casts to the input dtype. Under
    ``create_graph=True`` the same rule runs on Tensors: higher-order gradients need no extra code.
    Positional parameters of ``forward`` are the op's inputs; keyword-only parameters are its
    (non-differentiable) params.

    Extra fields beyond the design contract, all optional:

    * ``differentiable=False`` marks ops whose outputs never require grad (``sign``, ``argmax``,
      comparisons); ``backward`` is then None and using them on grad-requiring tensors is fine.
    * ``composite=True`` marks an op whose ``forward`` is written with other ops on Tensors; its
      gradient flows through those ops, so ``backward`` is None.
    * ``double_backward=False`` declares that ``backward`` is not itself differentiable;
      differentiating through it with ``create_graph=True`` then raises a clear error.
    * ``examples`` are sample calls (:class:`Example`) that ``sadl.testing.check_op`` runs.
    * ``singular_points`` are sample calls at points where the op is not smooth or a naive rule
      divides by zero (``norm`` at 0, ``std`` of a constant, ties of ``max``): ``check_op``
      requires a finite gradient there that lies between the one-sided difference quotients,
      and tests compare it with PyTorch where installed.

    A single ``backward`` callable that declares a keyword parameter ``needs_input_grad``
    receives a tuple of bools (one per input) and may skip the gradients marked False (returning
    None there): a fused op computing shared work once still avoids the work nobody needs.
    A tuple of per-input rules may be longer than the inputs of a call (optional trailing inputs).

    Calling an ``OpDef`` applies it: with any Tensor argument the result is a Tensor on the graph,
    with plain arrays it just runs ``forward``.

    >>> import numpy as np
    >>> from sadl.plugins import OpDef
    >>> cube = OpDef("cube", lambda x: x**3, (lambda g, out, x: 3 * g * x**2,))
    >>> cube(np.array([2.0]))
    array([8.])
    """

    name: str
    forward: Callable[..., Any]
    backward: BackwardRule | None = None
    numpy_funcs: tuple[Callable[..., Any], ...] = ()
    doc: str = ""
    differentiable: bool = True
    composite: bool = False
    double_backward: bool = True
    examples: tuple[Example, ...] = ()
    singular_points: tuple[Example, ...] = ()
    accepts_needs_input_grad: bool = field(init=False, repr=False, default=False)
    #: The forward's positional parameters: given by keyword, they are inputs all the same.
    input_names: tuple[str, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        _check_name(self, self.name)
        if not callable(self.forward):
            raise TypeError(f"OpDef {self.name!r}: forward must be callable, got {self.forward!r}")
        if self.composite and self.backward is not None:
            raise TypeError(
                f"OpDef {self.name!r}: a composite op gets its gradient from the ops it is built "
                "of; drop `backward` or set composite=False"
            )
        if not self.differentiable and self.backward is not None:
            raise TypeError(f"OpDef {self.name!r}: differentiable=False ops take no backward rule")
        bw = self.backward
        if (bw is not None and not callable(bw)) and not (
            isinstance(bw, tuple) and all(callable(f) for f in bw)
        ):
            raise TypeError(
                f"OpDef {self.name!r}: backward must be a callable or a tuple of callables "
                "(one per input)"
            )
        if callable(bw) and not isinstance(bw, tuple):
            try:
                rule_params = inspect.signature(bw).parameters
            except (TypeError, ValueError):
                rule_params = {}  # type: ignore[assignment]
            object.__setattr__(self, "accepts_needs_input_grad", "needs_input_grad" in rule_params)
        try:
            forward_params = inspect.signature(self.forward).parameters.values()
        except (TypeError, ValueError):
            forward_params = ()  # type: ignore[assignment]
        names = tuple(p.name for p in forward_params if p.kind is p.POSITIONAL_OR_KEYWORD)
        object.__setattr__(self, "input_names", names)
        for key in ("numpy_funcs", "examples", "singular_points"):  # lists given become tuples
            object.__setattr__(self, key, tuple(getattr(self, key)))
        if self.singular_points and not self.differentiable:
            raise TypeError(
                f"OpDef {self.name!r}: singular_points need a gradient; this op is "
                "differentiable=False"
            )
        if not self.doc:
            object.__setattr__(self, "doc", _summary(getattr(self.forward, "__doc__", None)))

    def __call__(self, *args: Any, **params: Any) -> Any:
        """Apply the op: a Tensor on the autograd graph if any argument is a Tensor."""
        return _call_op(self, args, params)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def _engine_missing(op: OpDef, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
    raise RuntimeError("sadl's engine is not loaded; import sadl before calling an op")


_call_op: Callable[[OpDef, tuple[Any, ...], dict[str, Any]], Any] = _engine_missing


def install_op_caller(caller: Callable[[OpDef, tuple[Any, ...], dict[str, Any]], Any]) -> None:
    """Called once by the engine (a higher layer): calling an ``OpDef`` runs ``caller``."""
    global _call_op
    _call_op = caller


def _summary(doc: str | None) -> str:
    """The first sentence-like line of a docstring (skipping a NumPy ufunc's call signature)."""
    lines = [line.strip() for line in (doc or "").strip().splitlines()]
    if lines and lines[0].endswith(")") and "(" in lines[0]:
        lines = lines[1:]
    return next((line for line in lines if line), "")


def _check_name(record: object, name: object) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{type(record).__name__}: name must be a Python identifier, got {name!r}")
