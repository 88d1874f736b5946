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


def test_the_bias_loop_adds_bit_for_bit_from_any_offset():
    from sadl_kernels._bias import _add_bias

    bias = RNG.standard_normal(96).astype(np.float32)
    for offset in (0, 5, 95):
        for n in (3, 200, 4096):
            x = RNG.standard_normal(n).astype(np.float32)
            expected = x + bias[(offset + np.arange(n)) % 96]
            _add_bias(x, bias, offset)
            np.testing.assert_array_equal(x, expected)
