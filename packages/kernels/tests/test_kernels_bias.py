"""A Linear's bias-add folded into the GELU kernel that follows it (bit for bit in h)."""

from __future__ import annotations

import numpy as np
import sadl
from kernel_cases import assert_close, eager_and_compiled, kernels_in

RNG = np.random.default_rng(0)
W = RNG.standard_normal((96, 48)).astype(np.float32) * 0.2
B = RNG.standard_normal(96).astype(np.float32)


_LAYER = []


def _linear():
    """One Linear(48, 96) for every test (made at first use: the layers plugin loads then)."""
    if not _LAYER:
        layer = sadl.nn.Linear(48, 96)
        layer.weight.data[...] = W
        layer.bias.data[...] = B
        _LAYER.append(layer)
    return _LAYER[0]


def mlp_step(x, g):
    y = sadl.ops.gelu(_linear()(x), approximate="tanh")
    (y * g).sum().backward()
    return y


def mlp_step_returning_h(x, g):
    h = _linear()(x)
    y = sadl.ops.gelu(h, approximate="tanh")
    (y * g).sum().backward()
    return y, h  # h handed out: the kernel stores the biased h back


def mlp_step_reading_h_first(x, g):
    h = _linear()(x)
    peek = h.sum()  # reads h between the bias-add and the GELU: the add must stay
    y = sadl.ops.gelu(h, approximate="tanh")
    (y * g).sum().backward()
    return y, peek.detach()


def _data(rows):
    return [RNG.standard_normal((rows, 48)).astype(np.float32), np.ones((rows, 96), np.float32)]


def test_the_bias_add_is_folded_into_the_gelu_blocks():
    for rows in (64, 1500):  # one GELU block; three (65536 is not a multiple of 96)
        data = _data(rows)
        out_e, out_c, ge, gc, compiled = eager_and_compiled(mlp_step, data)
        assert str(compiled.graph).count("kernel[gelu+bias]") == 1  # one per application
        assert "bias-add into gelu x1" in str(compiled.graph)
        assert_close(out_c, out_e, 1e-6)
        assert np.all(np.abs(gc[0] - ge[0]) <= 5e-6 * 96 + 1e-6 * np.abs(ge[0]))


def test_the_biased_h_is_stored_back_bit_for_bit():
    (_, he), (_, hc), _, _, compiled = eager_and_compiled(mlp_step_returning_h, _data(64))
    assert "kernel[gelu+bias]" in str(compiled.graph)
    np.testing.assert_array_equal(hc.numpy(), he.numpy())


def test_the_add_stays_when_h_is_read_first_or_bias_is_switched_off(monkeypatch):
    data = _data(64)
    (ye, pe), (yc, pc), _, _, compiled = eager_and_compiled(mlp_step_reading_h_first, data)
    assert "kernel[gelu+bias]" not in str(compiled.graph)
    assert kernels_in(compiled, "gelu") == kernels_in(compiled, "gelu_backward") == 1
    assert_close(yc, ye, 1e-6)
    assert pc.item() == pe.item()
    monkeypatch.setenv("SADL_KERNELS_DISABLE", "bias")
    *_, compiled = eager_and_compiled(mlp_step, data)
    assert "kernel[gelu+bias]" not in str(compiled.graph)
    assert kernels_in(compiled, "gelu") == kernels_in(compiled, "gelu_backward") == 1


def test_the_fused_bias_and_gelu_kernel_is_the_add_then_the_gelu_kernel_bit_for_bit():
    from sadl_kernels._bias import gelu_forward_bias_into
    from sadl_kernels._gelu import gelu_forward_into

    for rows, width in ((1, 96), (3, 7), (515, 96)):
        h = RNG.standard_normal((rows, width)).astype(np.float32)
        bias = RNG.standard_normal(width).astype(np.float32)
        biased, expected = h + bias, np.empty_like(h)
        gelu_forward_into(biased, expected)
        out = np.full_like(h, np.nan)
        gelu_forward_bias_into(h, bias, out)
        np.testing.assert_array_equal(h, biased)  # stored back: the backward reads it
        np.testing.assert_array_equal(out, expected)
