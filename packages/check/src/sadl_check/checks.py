"""The conformance batteries: ``check_op``, ``check_layer`` and ``check_optimizer``.

Built on ``sadl.testing.gradcheck`` and ``gradgradcheck`` (core), each runs on one registered
record; ``sadl check-plugins`` runs them on every installed plugin. ``check_op`` also runs the
variants it derives from each example (``sadl_check._variants``: negative axes, 0-d inputs, an
empty dimension, strided and transposed inputs, broadcasting) and the op's singular points.
``check_op(op, device=...)`` runs an op on another device and compares it with the CPU.

For device tests (from ``sadl_check._devicecheck``): ``available_devices()`` lists the device
types to test on, ``move`` copies inputs to a device, ``project`` turns outputs into one scalar
with the same weights on every device, ``assert_close`` compares results across devices, and
``serve_device_as`` lets a stand-in backend pose as ``"cuda"`` so CUDA-only code paths run
without a GPU.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sadl import SGD, Function, Optimizer, Parameter, Tensor, backends, get_default_dtype, no_grad
from sadl import grad as _grad
from sadl.plugins import Example, LayerDef, OpDef, OptimizerDef
from sadl.testing import (
    GradcheckError,
    Projection,
    gradcheck,
    gradgradcheck,
    is_float_input,
    outputs,
)

from sadl_check._devicecheck import (
    assert_close,
    available_devices,
    float32_on_device,
    move,
    no_grad_on_device,
    project,
    same_as_cpu,
    serve_device_as,
    tensors,
)
from sadl_check._variants import Variant, derive_variants
from sadl_check.singular import singular_point_check

__all__ = [
    "CheckResult",
    "OpReport",
    "assert_close",
    "available_devices",
    "check_layer",
    "check_op",
    "check_optimizer",
    "materialize",
    "move",
    "project",
    "serve_device_as",
]


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
    """Everything ``check_op`` (``check_layer``, ``check_optimizer``) found for one record.

    For an op, ``variants`` counts the derived calls that ran (see ``sadl._variants``) and
    ``singular_points`` the declared singular points that were checked.
    """

    op: str
    results: list[CheckResult] = field(default_factory=list)
    kind: str = "op"
    variants: int = 0
    singular_points: int = 0

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(r.ok for r in self.results)

    def failures(self) -> list[CheckResult]:
        """The checks that failed."""
        return [r for r in self.results if not r.ok]

    def __str__(self) -> str:
        lines = [f"{self.kind} {self.op}: {'ok' if self.ok else 'FAILED'}"]
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
    variants: bool = True,
    device: str | backends.Device | None = None,
) -> OpReport:
    """Run the conformance battery on ``op`` over its examples (or the given ones).

    Checks, per example: gradcheck and gradgradcheck in float64 (or, for an op that declares
    ``double_backward=False``, that differentiating twice raises a clear error); float32 and
    default-dtype inputs give outputs and gradients of that dtype; nothing is recorded under
    ``no_grad``; a non-differentiable op returns tensors that do not require grad.

    With ``variants`` (the default) the same checks run on the calls derived from each example:
    negative axes, 0-d inputs, an empty dimension, strided and transposed inputs (whose outputs
    must equal the contiguous ones), a broadcast input. Then each of the op's
    ``singular_points``: the gradient there is finite and, where the op is defined on both
    sides, lies between the one-sided difference quotients.
    With ``device`` (say ``"cuda"``) the battery runs on that device instead, against the CPU:
    the example's arrays go there, the outputs must stay there and equal the CPU's, and the
    float64 gradients (and, unless ``double_backward=False``, the second derivatives) must
    equal the CPU's within 1e-6; float32 stays float32 and ``no_grad`` records nothing.
    (``device="cpu"`` compares the CPU with itself: the device battery's own baseline, cheap.)
    """
    if device is not None:
        return _check_op_on_device(
            op, examples, backends.parse_device(device), seed, raise_exception
        )
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
    tolerances = {"atol": atol, "rtol": rtol, "seed": seed}
    rng = np.random.default_rng(seed)

    def call(*args: Any, **params: Any) -> Any:
        return op(*args, **params)

    for example in cases:
        inputs, params = materialize(example, rng)
        label = repr(example)
        _battery(report, op, Variant("example", inputs, params), label, tolerances)
        if not variants:
            continue
        for variant in derive_variants(call, inputs, params):
            report.variants += 1
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                # NumPy's own warnings on degenerate calls (the mean of an empty axis is nan)
                warnings.simplefilter("ignore", RuntimeWarning)
                _battery(report, op, variant, f"{label} [{variant.kind}]", tolerances)
    if op.differentiable and examples is None:
        for example in op.singular_points:
            inputs, params = materialize(example, rng)
            report.singular_points += 1
            check = (_bind(op, params), *inputs)
            label = f"{example!r} [singular point]"
            _run(report, label, "singular_point", singular_point_check, check, tolerances)
    if raise_exception and not report.ok:
        raise GradcheckError(str(report))
    return report


def _check_op_on_device(
    op: OpDef,
    examples: Sequence[Example] | None,
    device: backends.Device,
    seed: int,
    raise_exception: bool,
) -> OpReport:
    report = OpReport(f"{op.name} on {device}")
    rng = np.random.default_rng(seed)
    for example in tuple(examples) if examples is not None else op.examples:
        inputs, params = materialize(example, rng)
        label, args = repr(example), (op, inputs, params, device)
        _run(report, label, "device_forward_and_grad", same_as_cpu, (*args, seed), {})
        _run(report, label, "device_float32", float32_on_device, args, {})
        _run(report, label, "device_no_grad", no_grad_on_device, args, {})
    return _finish(report, raise_exception)


def _bind(op: OpDef, params: dict[str, Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return op(*args, **params)

    return call


def _battery(
    report: OpReport, op: OpDef, case: Variant, label: str, tolerances: dict[str, Any]
) -> None:
    call = _bind(op, case.params)
    inputs = case.inputs
    reference = case.reference if case.same_values else None
    checks: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
        ("forward", _check_forward, (call, inputs, reference))
    ]
    if op.differentiable:
        checks.append(("gradcheck", gradcheck, (call, *inputs)))
        if op.double_backward:
            checks.append(("gradgradcheck", gradgradcheck, (call, *inputs)))
        else:
            checks.append(("double_backward_raises", _check_double_backward_raises, (call, inputs)))
        fixed = "dtype" in case.params
        for dtype in dict.fromkeys([np.dtype(np.float32), get_default_dtype()]):
            checks.append((str(dtype), _check_dtype, (call, inputs, dtype, fixed)))
    else:
        checks.append(("no_gradient", _check_nondifferentiable, (call, inputs)))
    checks.append(("no_grad", _check_no_grad, (call, inputs)))
    for name, check, args in checks:
        _run(report, label, name, check, args, tolerances if name.startswith("grad") else {})


def _run(
    report: OpReport,
    label: str,
    name: str,
    check: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    try:
        check(*args, **kwargs)
    except Exception as exc:
        report.results.append(CheckResult(name, label, False, f"{type(exc).__name__}: {exc}"))
    else:
        report.results.append(CheckResult(name, label, True))


def _check_forward(
    call: Callable[..., Any], inputs: Sequence[Any], reference: Sequence[Any] | None = None
) -> None:
    plain = call(*inputs)
    via_tensors = call(*tensors(inputs))
    for a, b in zip(_outputs_any(plain), outputs(via_tensors)):
        if not np.allclose(
            np.asarray(a, dtype=float), np.asarray(b.data, dtype=float), equal_nan=True
        ):
            raise AssertionError("forward on arrays and on Tensors disagree")
    if reference is not None:
        for out, expected in zip(outputs(via_tensors), reference):
            if out.shape != expected.shape or not np.allclose(out.data, expected, equal_nan=True):
                raise AssertionError("the same values in another memory layout gave other outputs")


def _outputs_any(result: Any) -> list[Any]:
    if isinstance(result, list | tuple):
        return list(result)
    return [result]


def _check_dtype(
    call: Callable[..., Any], inputs: Sequence[Any], dtype: Any, fixed_dtype: bool = False
) -> None:
    xs = tensors(inputs, dtype)
    outs = [o for o in outputs(call(*xs)) if o.dtype.kind == "f"]
    for o in outs:
        if o.dtype != dtype and not fixed_dtype:
            raise AssertionError(f"{dtype} inputs gave a {o.dtype} output")
    total = None
    for o in outs:
        term = o.sum()
        total = term if total is None else total + term
    if total is None or not total.requires_grad:
        return
    total.backward()
    for i, x in enumerate(xs):
        if isinstance(x, Tensor) and x.grad is not None and x.grad.dtype != dtype:
            raise AssertionError(f"{dtype} input {i} got a {x.grad.dtype} gradient")


def _check_no_grad(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    with no_grad():
        outs = outputs(call(*tensors(inputs)))
    for o in outs:
        if o.requires_grad or o.grad_fn is not None:
            raise AssertionError("an output recorded the graph under no_grad()")


def _check_nondifferentiable(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    for o in outputs(call(*tensors(inputs))):
        if o.requires_grad:
            raise AssertionError("a non-differentiable op returned a tensor that requires grad")


def _check_double_backward_raises(call: Callable[..., Any], inputs: Sequence[Any]) -> None:
    xs = tensors(inputs)
    diff = [x for x in xs if isinstance(x, Tensor)]
    s = Projection(0)(call(*xs))
    grads = [g for g in _grad(s, diff, create_graph=True, allow_unused=True) if g is not None]
    total = sum((g.sum() for g in grads), start=Tensor(0.0, dtype=np.float64))
    try:
        total.backward()
    except RuntimeError as exc:
        if "double backward" in str(exc):
            return
        raise
    raise AssertionError("double_backward=False, but differentiating twice did not raise")


# --------------------------------------------------------------------------------------------
# check_layer / check_optimizer: what ``sadl check-plugins`` runs on layers and optimizers
# --------------------------------------------------------------------------------------------


def _run_checks(
    report: OpReport, label: str, checks: Sequence[tuple[str, Callable[[], Any]]]
) -> None:
    """Run ``checks`` in order; the first failure stops the rest (they build on each other)."""
    for name, check in checks:
        try:
            check()
        except Exception as exc:
            report.results.append(CheckResult(name, label, False, f"{type(exc).__name__}: {exc}"))
            return
        report.results.append(CheckResult(name, label, True))


def _abstract(report: OpReport) -> OpReport:
    """A registered abstract base class (to subclass, never built): nothing to run."""
    report.results.append(CheckResult("abstract", "", True, "an abstract base class: not built"))
    return report


def _finish(report: OpReport, raise_exception: bool) -> OpReport:
    if raise_exception and not report.ok:
        raise GradcheckError(str(report))
    return report


def check_layer(
    layer: LayerDef,
    examples: Sequence[Example] | None = None,
    *,
    seed: int = 0,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> OpReport:
    """Build a registered layer from each example and run it forward and backward.

    In an :class:`Example` for a layer the positional inputs are the forward inputs and the
    keywords go to the constructor. Checks: it builds; forward gives Tensors; backward reaches
    every parameter (a gradient of its shape and dtype, finite) and every float input; a sample
    of parameter and input elements agrees with float64 central differences (in eval mode);
    nothing is recorded under ``no_grad``. A container without a forward pass is only built.
    """
    report = OpReport(layer.name, kind="layer")
    cases = tuple(examples) if examples is not None else layer.examples
    if inspect.isabstract(layer.cls):
        return _abstract(report)
    if not cases:
        report.results.append(
            CheckResult(
                "examples",
                "",
                False,
                "the layer has no examples; add LayerDef(..., examples=(Example(input_shape, "
                "**constructor_kwargs),)) to check it",
            )
        )
    rng = np.random.default_rng(seed)
    for example in cases:
        inputs, params = materialize(example, rng)
        built: list[Function] = []

        def build(_params: dict[str, Any] = params, _built: list[Function] = built) -> None:
            module = layer.cls(**_params)
            if not isinstance(module, Function):
                raise TypeError(f"{layer.cls.__name__}(...) is not a sadl.nn.Module")
            _built.append(module)

        def runs(_inputs: list[Any] = inputs, _built: list[Function] = built) -> None:
            module = _built[0]
            if not _has_forward(module):
                return
            _layer_backward(module, _inputs)
            _layer_gradcheck(module, _inputs, rng, atol, rtol)
            plain = [Tensor(x) if is_float_input(x) else x for x in _inputs]
            with no_grad():
                outs = outputs(module(*plain))
            if any(o.requires_grad for o in outs):
                raise AssertionError("an output recorded the graph under no_grad()")

        _run_checks(report, repr(example), [("build", build), ("forward_backward", runs)])
    return _finish(report, raise_exception)


def _has_forward(module: Function) -> bool:
    cls = type(module)
    return cls.forward is not Function.forward or cls.__call__ is not Function.__call__


def _layer_backward(module: Function, inputs: Sequence[Any]) -> None:
    xs = tensors([x.astype(np.float32) if is_float_input(x) else x for x in inputs])
    outs = [o for o in outputs(module(*xs)) if o.dtype.kind == "f"]
    if not outs:
        raise AssertionError("forward returned no floating-point Tensor")
    total = sum((o.sum() for o in outs[1:]), start=outs[0].sum())
    if not total.requires_grad:
        raise AssertionError("the output does not require grad: nothing would be trained")
    total.backward()
    for name, p in module.named_parameters():
        if p.grad is None:
            raise AssertionError(f"parameter {name!r} got no gradient")
        grad = np.asarray(p.grad.data if isinstance(p.grad, Tensor) else p.grad)
        if grad.shape != p.shape or grad.dtype != p.dtype or not np.isfinite(grad).all():
            raise AssertionError(
                f"parameter {name!r} ({p.dtype}, {p.shape}) got a {grad.dtype} gradient of "
                f"shape {grad.shape}{'' if np.isfinite(grad).all() else ' with inf or nan'}"
            )
    for i, x in enumerate(xs):
        if isinstance(x, Tensor) and x.grad is None:
            raise AssertionError(f"float input {i} got no gradient")


def _layer_gradcheck(
    module: Function, inputs: Sequence[Any], rng: np.random.Generator, atol: float, rtol: float
) -> None:
    """Central differences at a few elements of every parameter and float input, in float64."""
    module.to(dtype=np.float64).eval()
    xs = tensors(inputs)
    targets: list[tuple[str, Tensor]] = list(module.named_parameters())
    targets += [(f"input {i}", x) for i, x in enumerate(xs) if isinstance(x, Tensor)]
    project = Projection(0)
    s = project(module(*xs))
    analytic = _grad(s, [t for _, t in targets], allow_unused=True)
    eps = 1e-6
    for (name, t), a in zip(targets, analytic):
        a_data = np.zeros(t.shape) if a is None else np.asarray(a.data)
        flat = t.data.reshape(-1)
        for j in rng.choice(flat.size, size=min(3, flat.size), replace=False):
            orig = flat[j]
            with no_grad():
                flat[j] = orig + eps
                plus = float(project(module(*xs)).data)
                flat[j] = orig - eps
                minus = float(project(module(*xs)).data)
            flat[j] = orig
            numeric = (plus - minus) / (2 * eps)
            got = float(a_data.reshape(-1)[j])
            if not abs(got - numeric) <= atol + rtol * abs(numeric):
                raise GradcheckError(
                    f"gradient of {name} at flat index {j}: analytic {got:.6g} vs numerical "
                    f"{numeric:.6g}"
                )


def check_optimizer(
    optimizer: OptimizerDef,
    examples: Sequence[Example] | None = None,
    *,
    seed: int = 0,
    raise_exception: bool = True,
) -> OpReport:
    """Build a registered optimizer (or scheduler) and take steps with it.

    An :class:`Example`'s keywords go to the constructor (no examples: the defaults). An
    ``Optimizer`` must update float32 and float64 parameters in place, in their dtype, to finite
    values; skip a parameter without a gradient; and continue identically after
    ``state_dict``/``load_state_dict``. A scheduler (any other class) is built on an SGD
    optimizer and must keep its learning rate a finite number over a few steps. An example's
    positional inputs are the shapes of the three parameters (the last gets no gradient) for an
    optimizer, and the arguments of every ``step()`` (a metric) for a scheduler.
    """
    report = OpReport(optimizer.name, kind="optimizer")
    cases = tuple(examples) if examples is not None else (optimizer.examples or (Example(),))
    if inspect.isabstract(optimizer.cls):
        return _abstract(report)
    rng = np.random.default_rng(seed)
    cls = optimizer.cls
    for example in cases:
        params, args = dict(example.params), example.inputs
        if issubclass(cls, Optimizer):
            checks = [("step", lambda p=params, a=args: _optimizer_steps(cls, p, rng, a))]
        else:
            checks = [("schedule", lambda p=params, a=args: _scheduler_steps(cls, p, rng, a))]
        _run_checks(report, repr(example), checks)
    return _finish(report, raise_exception)


def _fresh_params(rng: np.random.Generator, shapes: Any = ()) -> list[Parameter]:
    a, b, c = shapes or ((3, 4), 5, 2)
    return [
        Parameter(rng.normal(size=a).astype(np.float32)),
        Parameter(rng.normal(size=b)),
        Parameter(np.ones(c, dtype=np.float32)),  # never gets a gradient
    ]


def _optimizer_steps(
    cls: type, kwargs: dict[str, Any], rng: np.random.Generator, shapes: Any
) -> None:
    params = _fresh_params(rng, shapes)
    twin = [Parameter(p.data.copy()) for p in params]
    grads = [[rng.normal(size=p.shape).astype(p.dtype) for p in params[:2]] for _ in range(2)]
    first, second = cls(params, **kwargs), cls(twin, **kwargs)
    before = [p.data.copy() for p in params]
    for step, step_grads in enumerate(grads):
        for ps, opt in ((params, first), (twin, second)):
            for p, g in zip(ps, step_grads):
                p.grad = g.copy()
            opt.step()
            opt.zero_grad()
        if step == 0:  # the twin continues from a saved and reloaded state
            state = second.state_dict()
            second = cls(twin, **kwargs)
            second.load_state_dict(state)
    for i, (p, old) in enumerate(zip(params, before)):
        if p.dtype != old.dtype or not np.isfinite(p.data).all():
            raise AssertionError(f"parameter {i} ({old.dtype}) became {p.dtype} or non-finite")
        if i < 2 and np.array_equal(p.data, old):
            raise AssertionError(f"parameter {i} did not change after two steps")
        if i == 2 and not np.array_equal(p.data, old):
            raise AssertionError("a parameter without a gradient was changed")
        if not np.allclose(p.data, twin[i].data, rtol=1e-6, atol=1e-7):
            raise AssertionError(
                f"parameter {i} differs after state_dict()/load_state_dict(): the saved state "
                "does not hold everything step() uses"
            )


def _scheduler_steps(
    cls: type, kwargs: dict[str, Any], rng: np.random.Generator, args: Any
) -> None:
    optimizer = SGD(_fresh_params(rng), lr=0.1)
    scheduler = cls(optimizer, **kwargs)
    for _ in range(3):
        optimizer.step()
        scheduler.step(*args)
        lr = optimizer.param_groups[0]["lr"]
        if not (isinstance(lr, int | float) and np.isfinite(lr) and lr >= 0):
            raise AssertionError(f"the learning rate became {lr!r}")
