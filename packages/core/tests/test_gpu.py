"""Every core op on CuPy against NumPy (float64, rtol 1e-6): run with `nox -s gpu` on a CUDA box."""

import numpy as np
import pytest
import sadl
from sadl._builtin import CORE_OPS
from sadl.testing import materialize

pytestmark = pytest.mark.gpu

if not sadl.cuda.is_available():
    pytest.skip("needs CuPy and a CUDA device (run `nox -s gpu` there)", allow_module_level=True)

import cupy as cp  # noqa: E402


def to_gpu(value):
    if isinstance(value, np.ndarray):
        return cp.asarray(value)
    if isinstance(value, tuple):
        return tuple(to_gpu(v) for v in value)
    if isinstance(value, list):
        return [to_gpu(v) for v in value]
    return value


def as_tensors(inputs, device):
    out = []
    for x in inputs:
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            out.append(sadl.Tensor(x, device=device, requires_grad=True))
        else:
            out.append(to_gpu(x) if device == "cuda" else x)
    return out


def project(result):
    outs = result if isinstance(result, list | tuple) else [result]
    total = None
    for k, o in enumerate(outs):
        if o.dtype.kind == "f":
            term = (o * (k + 1.5)).sum()
            total = term if total is None else total + term
    return total


@pytest.mark.parametrize("op", CORE_OPS, ids=lambda op: op.name)
def test_op_on_cuda_matches_numpy(op):
    rng = np.random.default_rng(0)
    for example in op.examples:
        inputs, params = materialize(example, rng)
        cpu_in = as_tensors(inputs, "cpu")
        gpu_in = as_tensors(inputs, "cuda")
        cpu_out = op(*cpu_in, **params)
        gpu_out = op(*gpu_in, **to_gpu(params))
        for a, b in zip(
            cpu_out if isinstance(cpu_out, list) else [cpu_out],
            gpu_out if isinstance(gpu_out, list) else [gpu_out],
        ):
            assert b.device.type == "cuda"
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-12)
        if not op.differentiable:
            continue
        project(cpu_out).backward()
        project(gpu_out).backward()
        for a, b in zip(cpu_in, gpu_in):
            if isinstance(a, sadl.Tensor) and a.grad is not None:
                assert isinstance(b.grad, cp.ndarray)
                np.testing.assert_allclose(cp.asnumpy(b.grad), a.grad, rtol=1e-6, atol=1e-12)


def test_mixing_devices_is_a_clear_error():
    a = sadl.tensor([1.0], device="cuda")
    b = sadl.tensor([1.0])
    with pytest.raises(RuntimeError, match="one device"):
        a + b


def test_to_is_differentiable_across_devices():
    x = sadl.tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    y = (x.to("cuda") * 3).to("cpu").sum()
    y.backward()
    np.testing.assert_allclose(x.grad, [3.0, 3.0])
