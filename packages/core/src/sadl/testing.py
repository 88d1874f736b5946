"""Gradient checks in float64, used by every package: ``gradcheck`` and ``gradgradcheck``.

``gradcheck`` compares the analytic gradient of a scalar projection of ``fn``'s outputs with
float64 central differences. ``gradgradcheck`` does the same for the gradient itself (computed
with ``create_graph=True``).

The conformance batteries built on them (``check_op``, ``check_layer``, ``check_optimizer``,
``materialize``) and the device-test helpers (``assert_close``, ``available_devices``, ``move``,
``project``, ``serve_device_as``) live in sadl-check (``sadl_check``); installed, they are
served here under their old names too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypedDict, Unpack

import numpy as np

from sadl import backends
from sadl._backward import grad as _grad
from sadl._namespace import served
from sadl._tensor import Tensor

__all__ = [
    "GradcheckError",
    "Projection",
    "gradcheck",
    "gradgradcheck",
    "is_float_input",
    "keep_layout_copy",
    "outputs",
]

#: Names served by sadl-check (``sadl.testing.check_op`` is ``sadl_check.check_op``).
SADL_CHECK_NAMES = frozenset(
    "CheckResult OpReport check_layer check_op check_optimizer materialize assert_close"
    " available_devices move project serve_device_as".split()
)
__getattr__ = served("sadl.testing", "sadl-check", "sadl_check", SADL_CHECK_NAMES)


class GradcheckError(AssertionError):
    """Analytic and numerical gradients disagree (the message says where and by how much)."""


def is_float_input(x: Any) -> bool:
    """True for a floating NumPy array or Tensor (what the checks differentiate)."""
    if isinstance(x, Tensor):
        return x.dtype.kind == "f"
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def _prepare(inputs: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """Float arrays/tensors become float64 leaf Tensors that require grad; the rest pass through."""
    prepared: list[Any] = []
    diff: list[int] = []
    for i, x in enumerate(inputs):
        if is_float_input(x):
            data = x.data if isinstance(x, Tensor) else x
            if data.dtype != np.float64:
                raise ValueError(
                    f"gradcheck: input {i} is {data.dtype}; central differences need float64 "
                    "inputs (cast with .astype(np.float64))"
                )
            prepared.append(Tensor(keep_layout_copy(data), requires_grad=True))
            diff.append(i)
        else:
            prepared.append(x)
    return prepared, diff


def outputs(result: Any) -> list[Tensor]:
    if isinstance(result, Tensor):
        return [result]
    if isinstance(result, list | tuple):
        return [out for r in result for out in outputs(r)]
    return []


class Projection:
    """s(x) = sum_k sum(out_k * w_k) with fixed random weights w_k (one per output)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.weights: list[Any] = []

    def __call__(self, result: Any) -> Any:
        total: Any = None
        for k, out in enumerate(outputs(result)):
            if out.dtype.kind != "f":
                continue
            if k >= len(self.weights):
                self.weights.append(self.rng.uniform(0.5, 1.5, size=out.shape))
            weights = self.weights[k]
            if not isinstance(out.data, np.ndarray):  # the same weights, where the output is
                weights = backends.to_device(weights, out.device)
            term = (out * weights).sum()
            total = term if total is None else total + term
        if total is None:
            raise ValueError("gradcheck: fn returned no floating-point Tensor")
        return total


_EPS, _ATOL, _RTOL = 1e-6, 1e-5, 1e-3  # gradcheck's defaults


def _central_differences(value: Callable[[], float], data: Any, eps: float) -> Any:
    """The derivative of ``value()`` by each element of ``data``, by central differences.

    ``data`` is perturbed in place, whatever its memory layout.
    """
    numeric = np.zeros(data.shape)
    for j in np.ndindex(data.shape):
        orig = data[j]
        data[j] = orig + eps
        plus = value()
        data[j] = orig - eps
        minus = value()
        data[j] = orig
        numeric[j] = (plus - minus) / (2 * eps)
    return numeric


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = _EPS,
    atol: float = _ATOL,
    rtol: float = _RTOL,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """Check ``fn``'s gradients against float64 central differences.

    Floating inputs (arrays or Tensors, float64) are differentiated; other inputs are constants.
    ``fn`` may return a Tensor or a sequence of Tensors. Returns True, or raises
    :class:`GradcheckError` naming the input, the element and both values.

    >>> import numpy as np
    >>> from sadl.testing import gradcheck
    >>> gradcheck(lambda x: (x * x).sum(), np.array([1.0, 2.0]))
    True
    """
    return _check(fn, fn, inputs, eps, atol, rtol, seed, raise_exception)


def _check(
    fn: Callable[..., Any],
    value_of: Callable[..., Any],
    inputs: Sequence[Any],
    eps: float = _EPS,
    atol: float = _ATOL,
    rtol: float = _RTOL,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """``gradcheck`` of ``fn``, whose central differences evaluate ``value_of``: the same values
    as ``fn`` without the graph only the analytic gradient needs (see ``gradgradcheck``).
    """
    xs, diff = _prepare(inputs)
    if not diff:
        raise ValueError("gradcheck: no floating-point input to differentiate")
    project = Projection(seed)
    s = project(fn(*xs))
    targets = [xs[i] for i in diff]
    analytic = _grad(s, targets, allow_unused=True) if s.requires_grad else (None,) * len(targets)
    for slot, (i, x) in enumerate(zip(diff, targets)):
        a = analytic[slot]
        a_data = np.zeros(x.shape) if a is None else np.asarray(a.data, dtype=np.float64)
        if a_data.shape != x.shape:
            return _fail(
                raise_exception,
                f"gradcheck: gradient of input {i} has shape {a_data.shape}, input has {x.shape}",
            )
        numeric = _central_differences(lambda: float(project(value_of(*xs)).data), x.data, eps)
        bad = np.abs(a_data - numeric) > atol + rtol * np.abs(numeric)
        if not np.isfinite(a_data).all():
            bad |= ~np.isfinite(a_data)
        if bad.any():
            where = tuple(int(k) for k in np.argwhere(bad)[0])
            return _fail(
                raise_exception,
                f"gradcheck: input {i} (shape {x.shape}) at {where}: analytic "
                f"{a_data[where]:.6g} vs numerical {numeric[where]:.6g} "
                f"(max abs error {np.max(np.abs(a_data - numeric)):.3g}, {int(bad.sum())} "
                "elements off)",
            )
    return True


class _Options(TypedDict, total=False):
    """``gradcheck``'s keywords, which ``gradgradcheck`` passes on."""

    eps: float
    atol: float
    rtol: float
    seed: int
    raise_exception: bool


def gradgradcheck(fn: Callable[..., Any], *inputs: Any, **options: Unpack[_Options]) -> bool:
    """Check second derivatives: ``gradcheck`` of the (create_graph) gradient of ``fn``.

    The central differences evaluate that gradient without ``create_graph`` (the values are
    checked to be the same at the inputs), which roughly halves the time of each evaluation. A
    gradient with no graph (a second derivative of zero) must not change along a random
    direction of the inputs.

    Takes ``gradcheck``'s keywords (``eps``, ``atol``, ``rtol``, ``seed``, ``raise_exception``).
    """
    xs, diff = _prepare(inputs)
    if not diff:
        raise ValueError("gradgradcheck: no floating-point input to differentiate")
    seed = options.get("seed", 0)
    project = Projection(seed + 1)

    def first_order(*args: Any, create_graph: bool = True) -> list[Tensor]:
        s = project(fn(*args))
        if not s.requires_grad:
            return []
        grads = _grad(s, [args[i] for i in diff], create_graph=create_graph, allow_unused=True)
        return [g for g in grads if g is not None]

    def values(*args: Any) -> list[Tensor]:  # what the central differences need: no graph
        return first_order(*args, create_graph=False)

    raise_exception = options.get("raise_exception", True)
    probe = first_order(*xs)
    if not probe:
        return True  # no output depends on the inputs (an empty one): nothing to differentiate
    if not any(g.requires_grad for g in probe):
        eps, atol = options.get("eps", _EPS), options.get("atol", _ATOL)
        return _no_second_derivative(values, xs, diff, seed + 2, eps, atol, raise_exception)
    plain = values(*xs)  # the differences take these: they must be the graph's values
    for k, (a, b) in enumerate(zip(probe, plain, strict=True)):
        a_data, b_data = (backends.to_device(t.data, "cpu") for t in (a, b))
        if not np.allclose(a_data, b_data, rtol=1e-10, atol=1e-12):
            return _fail(
                raise_exception,
                f"gradgradcheck: gradient {k} with create_graph=True differs from the one "
                f"without (max abs difference {np.max(np.abs(a_data - b_data)):.3g})",
            )
    return _check(first_order, values, inputs, **(options | {"seed": seed + 2}))


def _no_second_derivative(
    values: Callable[..., Any],
    xs: list[Any],
    diff: list[int],
    seed: int,
    eps: float,
    atol: float,
    raise_exception: bool,
) -> bool:
    """A gradient with no graph says its second derivative is zero: the gradient's values must
    then not change along a random direction of the inputs (a backward rule that used an input
    as a constant would pass otherwise).
    """
    rng, project = np.random.default_rng(seed), Projection(seed)
    starts = [keep_layout_copy(backends.to_device(xs[i].data, "cpu")) for i in diff]
    steps = [rng.uniform(-1.0, 1.0, size=x.shape) for x in starts]

    def slope(h: float) -> float:
        ends = []
        for step in (h, -h):
            for i, x, u in zip(diff, starts, steps, strict=True):
                xs[i].data[...] = backends.to_device(x + step * u, xs[i].device)
            ends.append(float(project(values(*xs)).data))
        for i, x in zip(diff, starts, strict=True):
            xs[i].data[...] = backends.to_device(x, xs[i].device)
        return (ends[0] - ends[1]) / (2 * h)

    change = slope(eps)
    # (a jump, at a tie of max or sort, doubles when the step halves; a slope stays)
    if abs(change) > atol and abs(slope(eps / 2)) < 1.5 * abs(change):
        return _fail(
            raise_exception,
            f"gradgradcheck: the gradient has no graph (a second derivative of zero), but its "
            f"values change with the inputs ({change:.3g} along a random direction): does a "
            "backward rule use an input as a constant?",
        )
    return True


def _fail(raise_exception: bool, message: str) -> bool:
    if raise_exception:
        raise GradcheckError(message)
    return False


def keep_layout_copy(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A copy of ``x`` with the same kind of memory layout (C, Fortran, or strided)."""
    if x.flags.c_contiguous or x.ndim == 0:
        return np.array(x, copy=True)
    if x.flags.f_contiguous:
        return np.array(x, copy=True, order="F")
    buffer = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
    view = buffer[..., ::2]  # the values in every other element of a buffer twice as long
    view[...] = x
    return view
