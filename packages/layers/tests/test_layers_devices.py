"""The device matrix for sadl-layers: every op, every layer's forward and backward, dropout.

``device`` is "cpu", "strict" (the strict CuPy stand-in) or "cuda" (where a GPU is). Every op
runs core's device battery (outputs stay on the device and equal the CPU's, float64 gradients
and second derivatives within 1e-6); every layer of the gradcheck table runs forward and
backward on a copy moved to the device and must give the CPU's output, input gradients and
parameter gradients within 1e-6 in float64.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import sadl
from sadl.backends import device_of
from sadl.testing import assert_close, check_op, move, project
from sadl_layers import (
    GRU,
    LSTM,
    RNN,
    BatchNorm2d,
    CausalSelfAttention,
    Dropout,
    Embedding,
    GRUCell,
    Linear,
    LSTMCell,
    RNNCell,
)
from sadl_layers.ops import INTERNAL_OPS, OPS
from test_layers import GRAD_CASES


@pytest.mark.parametrize("op", OPS + INTERNAL_OPS, ids=lambda op: op.name)
def test_layers_op_on_device_matches_cpu(op, device):
    report = check_op(op, device=device, raise_exception=False)
    assert report.ok, str(report)


def forward_backward(layer, inputs):
    """Output, input gradients and parameter gradients of ``project(layer(*inputs))``."""
    xs = [
        sadl.Tensor(x, requires_grad=True) if x.dtype.kind == "f" else x
        for x in (sadl.tensor(i) if not isinstance(i, sadl.Tensor) else i for i in inputs)
    ]
    out = layer(*xs)
    project(out).backward()
    grads = [x.grad for x in xs if x.requires_grad]
    return out, grads, {n: p.grad for n, p in layer.named_parameters()}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_layer_forward_and_backward_on_device_match_the_cpu(name, device):
    make, inputs = GRAD_CASES[name]
    cpu = make().to(dtype=np.float64)
    there = copy.deepcopy(cpu).to(device)
    assert all(p.device.type == device for p in there.parameters())
    expected = forward_backward(cpu, [sadl.tensor(x) for x in inputs])
    got = forward_backward(there, [sadl.tensor(x, device=device) for x in inputs])
    assert_close(got, expected, device=device)
    # Buffers a forward updates (BatchNorm's running statistics) stay on the device too.
    assert_close(there.state_dict(), cpu.state_dict(), device=device)


def test_dropout_draws_its_mask_on_the_device_from_sadls_generator(device):
    layer = Dropout(0.4)
    x = sadl.tensor(np.ones((64, 64)), device=device, requires_grad=True)
    sadl.manual_seed(5)
    y = layer(x)
    assert y.device.type == device
    kept = y.numpy() != 0
    assert 0.5 < kept.mean() < 0.7  # keep probability 0.6
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.6)
    y.sum().backward()
    assert_close(x.grad, kept / 0.6, device=device)
    sadl.manual_seed(5)
    again = layer(x).numpy()
    np.testing.assert_array_equal(again, y.numpy())  # reproducible on this device type
    layer.eval()
    assert layer(x) is x or np.array_equal(layer(x).numpy(), x.numpy())


def test_dropout_with_its_own_generator_draws_the_same_mask_everywhere(device):
    # A NumPy generator owned by the layer draws on the host: the same mask on every device.
    cpu, there = Dropout(0.5, rng=3), Dropout(0.5, rng=3)
    a = cpu(sadl.tensor(np.ones((8, 8)))).numpy()
    b = there(sadl.tensor(np.ones((8, 8)), device=device))
    assert b.device.type == device
    np.testing.assert_array_equal(b.numpy(), a)


def test_attention_with_dropout_trains_on_the_device(device):
    layer = CausalSelfAttention(8, 2, dropout=0.2, rng=0).to(device)
    x = sadl.tensor(np.random.default_rng(0).standard_normal((2, 5, 8)), device=device)
    out = layer(x)
    assert out.device.type == device and out.shape == (2, 5, 8)
    project(out).backward()
    assert all(device_of(p.grad).type == device for p in layer.parameters())


def test_embedding_takes_device_ids_and_host_ids(device):
    layer = Embedding(6, 3, rng=0).to(device)
    ids = np.array([[0, 5, 5], [2, 1, 0]])
    from_host = layer(ids)
    from_device = layer(sadl.tensor(ids, device=device))
    assert from_host.device.type == device
    assert_close(from_device, from_host, device=device, rtol=0, atol=0)


def test_layers_built_on_the_cpu_move_with_their_buffers(device):
    norm = BatchNorm2d(2)
    norm(sadl.tensor(np.random.default_rng(1).standard_normal((2, 2, 3, 3))))
    moved = copy.deepcopy(norm).to(device)
    assert moved.running_mean.device.type == device
    moved.eval()
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 3))
    norm.eval()
    assert_close(moved(sadl.tensor(x, device=device)), norm(sadl.tensor(x)), device=device)
    lin = Linear(3, 2, rng=0).to(device, dtype=np.float64)
    state = move(lin.state_dict(), "cpu")
    assert all(t.device == "cpu" for t in state.values())


def _recurrent_outputs(layer, x):
    """Output, final states (a flat tuple), input gradient and parameter gradients."""
    out = layer(x)
    if isinstance(layer, RNNCell | GRUCell):  # the new hidden state only
        y, finals = out, ()
    else:  # (output, final state(s)); LSTMCell's (h, c) reads as output h, final c
        y, h = out
        finals = h if isinstance(h, tuple) else (h,)
    loss = project(y)
    for state in finals:
        loss = loss + project(state)
    loss.backward()
    return y, finals, x.grad, {n: p.grad for n, p in layer.named_parameters()}


@pytest.mark.parametrize(
    "make, x_shape",
    [
        (lambda: LSTM(3, 2, num_layers=2, bidirectional=True, rng=0), (4, 2, 3)),
        (lambda: GRU(3, 2, batch_first=True, rng=0), (2, 4, 3)),
        (lambda: RNN(3, 2, nonlinearity="relu", rng=0), (4, 2, 3)),
        (lambda: LSTMCell(3, 2, rng=0), (2, 3)),
        (lambda: GRUCell(3, 2, rng=0), (2, 3)),
        (lambda: RNNCell(3, 2, rng=0), (2, 3)),
    ],
    ids=["LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell"],
)
def test_recurrent_layers_on_device_match_the_cpu(make, x_shape, device):
    cpu = make().to(dtype=np.float64)
    there = copy.deepcopy(cpu).to(device)
    x = np.random.default_rng(1).standard_normal(x_shape)
    expected = _recurrent_outputs(cpu, sadl.tensor(x, requires_grad=True))
    got = _recurrent_outputs(there, sadl.tensor(x, device=device, requires_grad=True))
    assert device_of(got[0].data).type == device
    assert_close(got, expected, device=device)


def test_init_functions_fill_device_parameters_like_cpu_ones(device):
    from sadl_layers import init

    for fill in (init.kaiming_uniform_, init.xavier_normal_, init.trunc_normal_, init.eye_):
        cpu = sadl.Parameter(np.zeros((4, 3), dtype=np.float32))
        there = sadl.Parameter(np.zeros((4, 3), dtype=np.float32), device=device)
        kwargs = {} if fill is init.eye_ else {"generator": 5}
        fill(cpu, **kwargs)
        fill(there, **kwargs)
        assert there.device.type == device and there.dtype == np.float32
        assert_close(there, cpu, device=device, rtol=0, atol=0)
