"""Device checks: the same computation on another device, compared with the CPU.

Public in ``sadl_check`` (served as ``sadl.testing.*`` too): ``available_devices``, ``move``,
``project``, ``assert_close``, ``serve_device_as``, and the per-example checks
``check_op(op, device=...)`` runs. A device result must stay on its device and equal the CPU's
within ``DEVICE_RTOL``/``DEVICE_ATOL`` (float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sadl import Tensor, backends, no_grad
from sadl import grad as _grad
from sadl.plugins import OpDef
from sadl.testing import Projection, is_float_input, outputs

__all__ = [
    "DEVICE_ATOL",
    "DEVICE_RTOL",
    "assert_close",
    "available_devices",
    "float32_on_device",
    "move",
    "no_grad_on_device",
    "project",
    "same_as_cpu",
    "serve_device_as",
    "tensors",
]

#: Device results must equal the CPU's within this (float64; relative, and absolute near 0).
DEVICE_RTOL = 1e-6
DEVICE_ATOL = 1e-9


def available_devices() -> list[str]:
    """The device types to test on: ``"cpu"`` and every registered backend with a usable device.

    ``["cpu", "cuda"]`` on a GPU machine with CuPy; a test-only backend plugin (sadl's strict
    CuPy stand-in, ``"strict"``) adds itself wherever it is installed.
    """
    found = ["cpu"]
    for name in backends.backend_names():
        if name == "cpu":
            continue
        try:
            count = backends.backend(name).record.device_count()
        except RuntimeError:  # its array module does not import here
            continue
        if count > 0:
            found.append(name)
    return found


def serve_device_as(device_type: str, backend: str) -> Any:
    """Context manager: ``device_type`` devices come from ``backend`` meanwhile (tests only).

    ``with serve_device_as("cuda", "strict"):`` makes ``"cuda"`` tensors the strict stand-in's
    arrays, so code that asks for ``"cuda"`` (``sadl train --device cuda``) runs in CI without
    a GPU. The backend's own name is unavailable meanwhile.
    """
    return backends._serve_as(device_type, backend)


def move(value: Any, device: str | backends.Device) -> Any:
    """``value`` with every array and Tensor copied to ``device`` (lists, tuples, dicts too).

    A Tensor becomes a new leaf there, keeping ``requires_grad``; other values pass through.
    """
    if isinstance(value, Tensor):
        return Tensor(backends.to_device(value.data, device), requires_grad=value.requires_grad)
    if backends.is_array(value):
        return backends.to_device(value, device)
    if isinstance(value, list | tuple):
        return type(value)(move(v, device) for v in value)
    if isinstance(value, dict):
        return {k: move(v, device) for k, v in value.items()}
    return value


def project(result: Any, seed: int = 0) -> Tensor:
    """One scalar from ``result``: ``sum_k sum(out_k * w_k)``, the same ``w_k`` on every device.

    ``result`` is a Tensor or a (nested) sequence of them; non-float ones are skipped. The
    weights are drawn from ``seed`` in [0.5, 1.5), so gradients through the projection compare
    across devices (and reach every element, unlike a plain sum's all-ones seed).
    """
    return Projection(seed)(result)  # type: ignore[no-any-return]


def assert_close(
    actual: Any,
    expected: Any,
    *,
    device: str | backends.Device | None = None,
    rtol: float = DEVICE_RTOL,
    atol: float = DEVICE_ATOL,
    where: str = "value",
) -> None:
    """Assert that ``actual`` equals ``expected`` (on the CPU, usually) to ``rtol``/``atol``.

    Both may be Tensors, arrays of any device, numbers, None, or nested lists, tuples and dicts
    of them. Integer and boolean arrays must be equal. With ``device`` every array and Tensor in
    ``actual`` must live on that device type (the mistake of computing on the host is caught).
    """
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), (
            f"{where}: keys {sorted(actual)} != {sorted(expected)}"
        )
        for k in expected:
            assert_close(
                actual[k], expected[k], device=device, rtol=rtol, atol=atol, where=f"{where}[{k!r}]"
            )
        return
    if isinstance(expected, list | tuple):
        assert isinstance(actual, list | tuple) and len(actual) == len(expected), (
            f"{where}: {type(actual).__name__} of {len(actual)} vs {len(expected)} items"
        )
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, device=device, rtol=rtol, atol=atol, where=f"{where}[{i}]")
        return
    if expected is None or actual is None:
        assert actual is expected, f"{where}: {actual!r} vs {expected!r}"
        return
    a_data = actual.data if isinstance(actual, Tensor) else actual
    e_data = expected.data if isinstance(expected, Tensor) else expected
    if device is not None and backends.is_array(a_data):
        want = backends.parse_device(device)
        got = backends.device_of(a_data)
        assert got.type == want.type, f"{where}: lives on {got}, expected {want}"
    a_host = np.asarray(backends.to_device(a_data, "cpu") if backends.is_array(a_data) else a_data)
    e_host = np.asarray(backends.to_device(e_data, "cpu") if backends.is_array(e_data) else e_data)
    assert a_host.shape == e_host.shape, f"{where}: shape {a_host.shape} vs {e_host.shape}"
    assert a_host.dtype == e_host.dtype, f"{where}: dtype {a_host.dtype} vs {e_host.dtype}"
    if e_host.dtype.kind in "fc":
        np.testing.assert_allclose(a_host, e_host, rtol=rtol, atol=atol, err_msg=where)
    else:
        np.testing.assert_array_equal(a_host, e_host, err_msg=where)


def _leaves(inputs: Sequence[Any], device: backends.Device | None, dtype: Any = None) -> list[Any]:
    """Float inputs as leaf Tensors that require grad, other arrays as constants, on ``device``."""
    return [x if device is None else move(x, device) for x in tensors(inputs, dtype)]


def tensors(inputs: Sequence[Any], dtype: Any = None) -> list[Any]:
    """Float arrays become Tensors that require grad (cast to ``dtype``); the rest pass through."""
    return [
        Tensor(x if dtype is None else x.astype(dtype), requires_grad=True)
        if is_float_input(x)
        else x
        for x in inputs
    ]


def same_as_cpu(
    op: OpDef, inputs: Sequence[Any], params: dict[str, Any], device: Any, seed: int
) -> None:
    cpu, dev = _leaves(inputs, None), _leaves(inputs, device)
    out_cpu, out_dev = op(*cpu, **params), op(*dev, **move(params, device))
    assert_close(out_dev, out_cpu, device=_placement(params, device), where="output")
    if not op.differentiable:
        return
    s_cpu, s_dev = project(out_cpu, seed), project(out_dev, seed)
    if not s_cpu.requires_grad:
        return
    second = op.double_backward
    diff_cpu = [x for x in cpu if isinstance(x, Tensor) and x.requires_grad]
    diff_dev = [x for x in dev if isinstance(x, Tensor) and x.requires_grad]
    g_cpu = _grad(s_cpu, diff_cpu, create_graph=second, allow_unused=True)
    g_dev = _grad(s_dev, diff_dev, create_graph=second, allow_unused=True)
    assert_close(list(g_dev), list(g_cpu), device=device, where="gradient")
    if not second:
        return
    used = [i for i, g in enumerate(g_cpu) if g is not None and g.requires_grad]
    if not used:
        return
    s2_cpu = project([g_cpu[i] for i in used], seed + 1)
    s2_dev = project([g_dev[i] for i in used], seed + 1)
    gg_cpu = _grad(s2_cpu, diff_cpu, allow_unused=True)
    gg_dev = _grad(s2_dev, diff_dev, allow_unused=True)
    assert_close(list(gg_dev), list(gg_cpu), device=device, where="second derivative")


def _placement(params: dict[str, Any], device: Any) -> backends.Device:
    """Where outputs belong: on the device, unless the op moves data (a ``device=`` param)."""
    target = params.get("device")
    return backends.parse_device(target) if isinstance(target, str) else device


def float32_on_device(
    op: OpDef, inputs: Sequence[Any], params: dict[str, Any], device: Any
) -> None:
    xs = _leaves(inputs, device, np.float32)
    outs = [o for o in outputs(op(*xs, **move(params, device))) if o.dtype.kind == "f"]
    placement = _placement(params, device)
    for o in outs:
        assert o.device.type == placement.type, f"an output lives on {o.device}"
    total = project(outs) if outs else None
    if total is None or not total.requires_grad:
        return
    total.backward()
    for i, x in enumerate(xs):
        if isinstance(x, Tensor) and x.grad is not None:
            assert x.grad.dtype == np.float32, f"float32 input {i} got a {x.grad.dtype} gradient"
            assert backends.device_of(x.grad).type == device.type, f"gradient {i} left the device"


def no_grad_on_device(
    op: OpDef, inputs: Sequence[Any], params: dict[str, Any], device: Any
) -> None:
    with no_grad():
        outs = outputs(op(*_leaves(inputs, device), **move(params, device)))
    for o in outs:
        if o.requires_grad or o.grad_fn is not None:
            raise AssertionError("an output recorded the graph under no_grad()")
