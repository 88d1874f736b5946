"""Public test helpers: ``gradcheck``, ``gradgradcheck`` and ``check_op``, used by every package.

``gradcheck`` compares the analytic gradient of a scalar projection of ``fn``'s outputs with
float64 central differences. ``gradgradcheck`` does the same for the gradient itself (computed
with ``create_graph=True``). ``check_op`` runs the whole conformance battery on one ``OpDef``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sadl._backward import grad as _grad
from sadl._grad_mode import no_grad
from sadl._records import Example, OpDef
from sadl._tensor import Tensor

__all__ = ["CheckResult", "GradcheckError", "OpReport", "check_op", "gradcheck", "gradgradcheck"]


class GradcheckError(AssertionError):
    """Analytic and numerical gradients disagree (the message says where and by how much)."""


def _is_float_input(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.dtype.kind == "f"
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def _prepare(inputs: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """Float arrays/tensors become float64 leaf Tensors that require grad; the rest pass through."""
    prepared: list[Any] = []
    diff: list[int] = []
    for i, x in enumerate(inputs):
        if _is_float_input(x):
            data = x.data if isinstance(x, Tensor) else x
            if data.dtype != np.float64:
                raise ValueError(
                    f"gradcheck: input {i} is {data.dtype}; central differences need float64 "
                    "inputs (cast with .astype(np.float64))"
                )
            prepared.append(Tensor(np.array(data, copy=True), requires_grad=True))
            diff.append(i)
        else:
            prepared.append(x)
    return prepared, diff


def _outputs(result: Any) -> list[Tensor]:
    if isinstance(result, Tensor):
        return [result]
    if isinstance(result, list | tuple):
        out = []
        for r in result:
            out.extend(_outputs(r))
        return out
    return []


class _Projection:
    """s(x) = sum_k sum(out_k * w_k) with fixed random weights w_k (one per output)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.weights: list[Any] = []

    def __call__(self, result: Any) -> Any:
        total: Any = None
        for k, out in enumerate(_outputs(result)):
            if out.dtype.kind != "f":
                continue
            if k >= len(self.weights):
                self.weights.append(self.rng.uniform(0.5, 1.5, size=out.shape))
            term = (out * self.weights[k]).sum()
            total = term if total is None else total + term
        if total is None:
            raise ValueError("gradcheck: fn returned no floating-point Tensor")
        return total


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """Check ``fn``'s gradients against float64 central differences.

    Floating inputs (arrays or Tensors, float64) are differentiated; other inputs are constants.
    ``fn`` may return a Tensor or a sequence of Tensors. Returns True, or raises
    :class:`GradcheckError` naming the input, the element and both values.
    """
    xs, diff = _prepare(inputs)
    if not diff:
        raise ValueError("gradcheck: no floating-point input to differentiate")
    project = _Projection(seed)
    s = project(fn(*xs))
    targets = [xs[i] for i in diff]
    if s.requires_grad:
        analytic = _grad(s, targets, allow_unused=True)
    else:
        analytic = tuple(None for _ in targets)
    for slot, (i, x) in enumerate(zip(diff, targets)):
        a = analytic[slot]
        a_data = np.zeros(x.shape) if a is None else np.asarray(a.data, dtype=np.float64)
        if a_data.shape != x.shape:
            return _fail(
                raise_exception,
                f"gradcheck: gradient of input {i} has shape {a_data.shape}, input has {x.shape}",
            )
        numeric = np.zeros(x.shape)
        flat = x.data.reshape(-1)
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            plus = float(project(fn(*xs)).data)
            flat[j] = orig - eps
            minus = float(project(fn(*xs)).data)
            flat[j] = orig
            numeric.reshape(-1)[j] = (plus - minus) / (2 * eps)
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


def gradgradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """Check second derivatives: ``gradcheck`` of the (create_graph) gradient of ``fn``."""
    xs, diff = _prepare(inputs)
    if not diff:
        raise ValueError("gradgradcheck: no floating-point input to differentiate")
    project = _Projection(seed + 1)

    def first_order(*args: Any) -> list[Tensor]:
        s = project(fn(*args))
        if not s.requires_grad:
            return []
        grads = _grad(s, [args[i] for i in diff], create_graph=True, allow_unused=True)
        return [g for g in grads if g is not None]

    probe = first_order(*xs)
    if not any(g.requires_grad for g in probe):
        return True  # the gradient does not depend on the inputs: second derivative is zero
    return gradcheck(
        first_order,
        *inputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        seed=seed + 2,
        raise_exception=raise_exception,
    )


def _fail(raise_exception: bool, message: str) -> bool:
    if raise_exception:
        raise GradcheckError(message)
    return False


# --------------------------------------------------------------------------------------------
# check_op: the conformance battery for one op
# --------------------------------------------------------------------------------------------


@dataclass
class CheckResult:
    """One check of ``check_op``: its name, the example, pass/fail and why."""

    check: str
    example: str
    ok: bool
    message: str = ""


@dataclass
class OpReport:
    """Everything ``check_op`` found for one op."""

    op: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(r.ok for r in self.results)

    def failures(self) -> list[CheckResult]:
        """The checks that failed."""
        return [r for r in self.results if not r.ok]

    def __str__(self) -> str:
        lines = [f"op {self.op}: {'ok' if self.ok else 'FAILED'}"]
        lines += [f"  {r.check} {r.example}: {r.message}" for r in self.failures()]
        return "\n".join(lines)


def materialize(example: Example, rng: np.random.Generator) -> tuple[list[Any], dict[str, Any]]:
    """Concrete inputs for an ``Example``: shapes become random float64 arrays."""
    lo, hi = example.domain
    inputs: list[Any] = []
    for x in example.inputs:
        if isinstance(x, tuple) and all(isinstance(n, int) for n in x):
            inputs.append(rng.uniform(lo, hi, size=x))
        elif isinstance(x, np.ndarray):
            inputs.append(x.copy())
        else:
            inputs.append(x)
    return inputs, dict(example.params)


def check_op(
    op: OpDef,
    examples: Sequence[Example] | None = None,
    *,
    seed: int = 0,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> OpReport:
    """Run the conformance battery on ``op`` over its examples (or the given ones).

    Checks, per example: gradcheck and gradgradcheck in float64 (or, for an op that declares
    ``double_backward=False``, that differentiating twice raises a clear error); float32 inputs
    give float32 outputs and float32 gradients; nothing is recorded under ``no_grad``; a
    non-differentiable op returns tensors that do not require grad.
    """
    report = OpReport(op.name)
    cases = tuple(examples) if examples is not None else op.examples
    if not cases:
        report.results.append(
            CheckResult(
                "examples",
                "",
                False,
                "the op has no examples; add OpDef(..., examples=(Example(...),)) to check it",
            )
        )
    rng = np.random.default_rng(seed)
    for example in cases:
        inputs, params = materialize(example, rng)
        label = repr(example)

        def call(*args: Any, _params: dict[str, Any] = params) -> Any:
            return op(*args, **_params)

        checks: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
            ("forward", _check_forward, (call, inputs))
        ]
        if op.differentiable:
            checks.append(("gradcheck", gradcheck, (call, *inputs)))
            if op.double_backward:
                checks.append(("gradgradcheck", gradgradcheck, (call, *inputs)))
            else:
                checks.append(
                    ("double_backward_raises", _check_double_backward_raises, (call, inputs))
                )
            checks.append(("float32", _check_float32, (call, inputs, "dtype" in params)))
        else:
            checks.append(("no_gradient", _check_nondifferentiable, (call, inputs)))
        checks.append(("no_grad", _check_no_grad, (call, inputs)))
        for name, check, args in checks:
            kwargs = {"atol": atol, "rtol": rtol, "seed": seed} if name.startswith("grad") else {}
            try:
                check(*args, **kwargs)
            except Exception as exc:
                message = f"{type(exc).__name__}: {exc}"
                report.results.append(CheckResult(name, label, False, message))
            else:
                report.results.append(CheckResult(name, label, True))
    if raise_exception and not report.ok:
        raise GradcheckError(str(report))
    return report


def _tensors(inputs: Sequence[Any], dtype: Any = None) -> list[Any]:
    out: list[Any] = []
    for x in inputs:
        if _is_float_input(x):
            data = x if dtype is None else x.astype(dtype)
            out.append(Tensor(data, requires_grad=True))
        else:
            out.append(x)
    return out


def _check_forward(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    plain = call(*inputs)
    via_tensors = call(*_tensors(inputs))
    for a, b in zip(_outputs_any(plain), _outputs(via_tensors)):
        if not np.allclose(
            np.asarray(a, dtype=float), np.asarray(b.data, dtype=float), equal_nan=True
        ):
            raise AssertionError("forward on arrays and on Tensors disagree")


def _outputs_any(result: Any) -> list[Any]:
    if isinstance(result, list | tuple):
        return list(result)
    return [result]


def _check_float32(
    call: Callable[..., Any], inputs: Sequence[Any], fixed_dtype: bool = False
) -> None:
    xs = _tensors(inputs, np.float32)
    outs = [o for o in _outputs(call(*xs)) if o.dtype.kind == "f"]
    for o in outs:
        if o.dtype != np.float32 and not fixed_dtype:
            raise AssertionError(f"float32 inputs gave a {o.dtype} output")
    total = None
    for o in outs:
        term = o.sum()
        total = term if total is None else total + term
    if total is None or not total.requires_grad:
        return
    total.backward()
    for i, x in enumerate(xs):
        if isinstance(x, Tensor) and x.grad is not None and x.grad.dtype != np.float32:
            raise AssertionError(f"float32 input {i} got a {x.grad.dtype} gradient")


def _check_no_grad(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    with no_grad():
        outs = _outputs(call(*_tensors(inputs)))
    for o in outs:
        if o.requires_grad or o.grad_fn is not None:
            raise AssertionError("an output recorded the graph under no_grad()")


def _check_nondifferentiable(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    for o in _outputs(call(*_tensors(inputs))):
        if o.requires_grad:
            raise AssertionError("a non-differentiable op returned a tensor that requires grad")


def _check_double_backward_raises(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    xs = _tensors(inputs)
    diff = [x for x in xs if isinstance(x, Tensor)]
    s = _Projection(0)(call(*xs))
    grads = [g for g in _grad(s, diff, create_graph=True, allow_unused=True) if g is not None]
    total = sum((g.sum() for g in grads), start=Tensor(0.0, dtype=np.float64))
    try:
        total.backward()
    except RuntimeError as exc:
        if "double backward" in str(exc):
            return
        raise
    raise AssertionError("double_backward=False, but differentiating twice did not raise")
