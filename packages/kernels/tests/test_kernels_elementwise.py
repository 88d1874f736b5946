"""GELU (tanh form) kernels: used for the recorded gelu applications, within the stated
tolerance of eager (float32 GELU 1e-6 forward, 5e-6 * |g| backward)."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from kernel_cases import assert_close, eager_and_compiled, kernels_in
from sadl_kernels._elementwise import _tanh32


def gelu_step(x, g):
    y = sadl.ops.gelu(x, approximate="tanh")
    (y * g).sum().backward()
    return y


@pytest.mark.parametrize("shape", [(64, 96), (300, 512)])  # one block; three, the last partial
def test_gelu_forward_and_backward_match_eager_within_the_stated_tolerance(shape):
    """Forward: atol = rtol = 1e-6. Backward: 5e-6 * |g| + 1e-6 * |dx| (the approximated tanh
    is within 3.5e-7; GELU' multiplies its error by up to about |x|^3 / 10 where t is near +-1)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    out_e, out_c, ge, gc, compiled = eager_and_compiled(gelu_step, [x, g])
    # one kernel per recorded application, however many blocks sadl-layers' code takes
    assert kernels_in(compiled, "gelu") == kernels_in(compiled, "gelu_backward") == 1
    assert_close(out_c, out_e, 1e-6)
    assert np.all(np.abs(gc[0] - ge[0]) <= 5e-6 * np.abs(g) + 1e-6 * np.abs(ge[0]))


def test_the_float32_tanh_is_within_3_5e_7_of_the_exact_value():
    x = np.linspace(-12, 12, 200_001, dtype=np.float32)
    got = np.array([_tanh32(v) for v in x[::7]], dtype=np.float32)
    assert np.abs(got - np.tanh(x[::7].astype(np.float64))).max() <= 3.5e-7
    assert _tanh32(np.float32(0.0)) == 0.0 and _tanh32(np.float32(40.0)) <= 1.0


def test_gelu_gradient_from_the_kernel_matches_the_derivative():
    """The backward kernel's g * GELU'(x) against a float64 evaluation of the derivative."""
    x = np.linspace(-6, 6, 4001, dtype=np.float32).reshape(1, -1)
    g = np.ones_like(x)
    _, _, _, gc, compiled = eager_and_compiled(gelu_step, [x, g])
    assert kernels_in(compiled, "gelu_backward") == 1
    x64 = x.astype(np.float64)
    c, a = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(c * (x64 + a * x64**3))
    exact = 0.5 * (1 + t) + 0.5 * x64 * (1 - t**2) * c * (1 + 3 * a * x64**2)
    np.testing.assert_allclose(gc[0], exact, atol=5e-6, rtol=1e-6)


def test_float64_gelu_stays_numpy_and_exact():
    x = np.linspace(-3, 3, 64).reshape(8, 8)
    out_e, out_c, ge, gc, compiled = eager_and_compiled(gelu_step, [x, np.ones_like(x)])
    assert kernels_in(compiled, "gelu") == kernels_in(compiled, "gelu_backward") == 0
    np.testing.assert_array_equal(out_c.numpy(), out_e.numpy())
    np.testing.assert_array_equal(gc[0], ge[0])
