"""RNN, LSTM, GRU and their cells: gradients (float64 gradcheck and gradgradcheck w.r.t. input,
initial states and every parameter), PyTorch parity (forward, backward, double backward) and
state dicts moving both ways between sadl and torch."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from layer_helpers import check_layer, rand
from sadl_layers import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

CLASSES = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}

# ------------------------------------------------------------------------- gradients


def _with_state(layer, *states):
    """The layer as a function of (x, *initial states), returning (output, final states)."""

    def fn(x, *hx):
        if not hx:
            y, h = layer(x)
        elif isinstance(layer, LSTM):
            y, h = layer(x, tuple(hx))
        else:
            y, h = layer(x, hx[0])
        finals = h if isinstance(h, tuple) else (h,)
        return (y, *finals)

    return fn


@pytest.mark.parametrize(
    "name, kwargs, x_shape",
    [
        ("LSTM", {}, (3, 2, 3)),
        ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}, (1, 2, 3)),
        ("GRU", {}, (3, 2, 3)),
        ("GRU", {"num_layers": 2, "bidirectional": True}, (2, 1, 3)),
        ("RNN", {"nonlinearity": "relu", "num_layers": 2}, (3, 2, 3)),
        ("RNN", {"bidirectional": True, "bias": False}, (4, 3)),  # unbatched
    ],
)
def test_layer_gradcheck_and_gradgradcheck(name, kwargs, x_shape):
    layer = CLASSES[name](3, 2, rng=0, **kwargs)
    layer.to(dtype=np.float64)
    fn = _with_state(layer)

    class Wrapped(sadl.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = layer

        def forward(self, x, *hx):
            return fn(x, *hx)

    x = rand(*x_shape)
    layers, directions = layer.num_layers, layer.num_directions
    batch = () if len(x_shape) == 2 else (x_shape[0] if layer.batch_first else x_shape[1],)
    states = [
        rand(layers * directions, *batch, 2, seed=5 + k) for k in range(2 if name == "LSTM" else 1)
    ]
    check_layer(Wrapped(), x, *states)


@pytest.mark.parametrize("cls", [RNNCell, LSTMCell, GRUCell], ids=lambda c: c.__name__)
def test_cell_gradcheck_and_gradgradcheck(cls):
    cell = cls(3, 2, rng=0)
    state = (rand(2, 2, seed=1), rand(2, 2, seed=2)) if cls is LSTMCell else (rand(2, 2, seed=1),)

    class Wrapped(sadl.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = cell

        def forward(self, x, *hx):
            out = self.cell(x, tuple(hx) if cls is LSTMCell else hx[0])
            return out if isinstance(out, tuple) else (out,)

    check_layer(Wrapped(), rand(2, 3), *state)


def test_dropout_between_layers_only_in_training():
    lstm = LSTM(4, 5, num_layers=3, dropout=0.5, rng=0)
    x = rand(6, 2, 4).astype(np.float32)
    sadl.manual_seed(0)
    a = lstm(x)[0].data
    sadl.manual_seed(1)
    b = lstm(x)[0].data
    assert not np.allclose(a, b)  # different masks between layers
    lstm.eval()
    np.testing.assert_array_equal(lstm(x)[0].data, lstm(x)[0].data)
    single = LSTM(4, 5, num_layers=1, dropout=0.5, rng=0)  # nothing to drop between
    np.testing.assert_array_equal(single(x)[0].data, single(x)[0].data)


def test_layers_keep_float32_and_accept_arrays():
    for cls in (RNN, LSTM, GRU):
        layer = cls(3, 4, rng=0)
        y, _ = layer(np.zeros((5, 2, 3), dtype=np.float32))
        assert y.dtype == np.float32 and y.shape == (5, 2, 4)
        y.sum().backward()
        assert all(p.grad.dtype == np.float32 for p in layer.parameters())


def test_parameter_names_and_shapes_follow_torch():
    lstm = LSTM(3, 4, num_layers=2, bidirectional=True, rng=0)
    names = {k: v.shape for k, v in lstm.state_dict().items()}
    assert names["weight_ih_l0"] == (16, 3)
    assert names["weight_hh_l0_reverse"] == (16, 4)
    assert names["weight_ih_l1"] == (16, 8)  # the layer above sees both directions
    assert names["bias_hh_l1_reverse"] == (16,)
    assert len(names) == 16
    gru = GRU(3, 4, bias=False, rng=0)
    assert {k: v.shape for k, v in gru.state_dict().items()} == {
        "weight_ih_l0": (12, 3),
        "weight_hh_l0": (12, 4),
    }
    cell = LSTMCell(3, 4, rng=0)
    assert set(cell.state_dict()) == {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: LSTM(3, 4)(np.zeros((2, 5, 2), np.float32)), r"LSTM\(3, 4\): input has shape"),
        (
            lambda: GRU(3, 4, num_layers=2)(np.zeros((2, 5, 3), np.float32), np.zeros((1, 5, 4))),
            r"GRU\(3, 4, num_layers=2\): hx has shape \(1, 5, 4\), expected \(2, 5, 4\)",
        ),
        (
            lambda: LSTM(3, 4)(np.zeros((2, 5, 3), np.float32), np.zeros((1, 5, 4))),
            r"hx must be a pair \(h0, c0\)",
        ),
        (lambda: RNN(3, 4, nonlinearity="gelu"), r"RNN: nonlinearity must be 'tanh' or 'relu'"),
        (lambda: LSTM(3, 4, dropout=1.5), r"LSTM: dropout must be a probability"),
        (lambda: LSTM(3, 0), r"LSTM: hidden_size must be an integer >= 1"),
        (lambda: LSTM(3, 4)(np.zeros((0, 2, 3), np.float32)), r"input has no time steps"),
        (
            lambda: sadl.ops.lstm_sequence(
                np.zeros((2, 1, 3)), None, None, np.zeros((8, 3)), np.zeros((8, 3))
            ),
            r"lstm_sequence: w_hh must have shape \(4 \* hidden_size, hidden_size\)",
        ),
        (lambda: GRUCell(3, 2)(np.zeros((2, 4))), r"GRUCell\(3, 2\): input has shape \(2, 4\)"),
    ],
)
def test_clear_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize("cls", [GRU, LSTM, GRUCell, LSTMCell])
def test_only_the_elman_layers_take_a_nonlinearity(cls):
    # torch's LSTM, GRU and their cells have none: it must not be accepted and ignored.
    with pytest.raises(TypeError, match="nonlinearity"):
        cls(3, 4, nonlinearity="relu")
    assert RNNCell(3, 4, nonlinearity="relu").nonlinearity == "relu"
    with pytest.raises(ValueError, match=r"RNNCell: nonlinearity must be 'tanh' or 'relu'"):
        RNNCell(3, 4, nonlinearity="gelu")


# ------------------------------------------------------------------------------ torch

torch_required = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None,
    reason="PyTorch is the reference for these parity tests",
)


def _torch():
    import torch

    return torch


def _to_torch(layer, tlayer):
    torch = _torch()
    tlayer.double()
    tlayer.load_state_dict(
        {k: torch.from_numpy(np.array(v.data)) for k, v in layer.state_dict().items()}
    )


def _run(layer, tlayer, x, states):
    """Outputs, final states and every gradient (first and second order) of both layers."""
    torch = _torch()
    lstm = isinstance(layer, LSTM | LSTMCell)
    xs = sadl.Tensor(x.copy(), requires_grad=True)
    ss = [sadl.Tensor(s.copy(), requires_grad=True) for s in states]
    tx = torch.from_numpy(x.copy()).requires_grad_()
    ts = [torch.from_numpy(s.copy()).requires_grad_() for s in states]
    hx = (tuple(ss) if lstm else ss[0]) if ss else None
    thx = (tuple(ts) if lstm else ts[0]) if ts else None
    out, tout = layer(xs, hx), tlayer(tx, thx)
    flat = list(out) if isinstance(out, tuple) else [out]
    tflat = list(tout) if isinstance(tout, tuple) else [tout]
    if isinstance(layer, LSTM):
        flat, tflat = [flat[0], *flat[1]], [tflat[0], *tflat[1]]
    elif isinstance(layer, RNN | GRU):
        flat, tflat = flat[:2], tflat[:2]
    for a, b in zip(flat, tflat):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = [np.random.default_rng(30 + k).uniform(0.5, 1.5, a.shape) for k, a in enumerate(flat)]
    leaves = [xs, *ss, *(p for _, p in layer.named_parameters())]
    tparams = dict(tlayer.named_parameters())
    tleaves = [tx, *ts, *(tparams[n] for n, _ in layer.named_parameters())]
    loss = sum((a * w).sum() for a, w in zip(flat, weights))
    tloss = sum((b * torch.from_numpy(w)).sum() for b, w in zip(tflat, weights))
    grads = sadl.grad(loss, leaves, create_graph=True)
    tgrads = torch.autograd.grad(tloss, tleaves, create_graph=True)
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g.data, tg.detach().numpy(), rtol=1e-9, atol=1e-11)
    vs = [np.random.default_rng(50 + k).uniform(-1, 1, g.shape) for k, g in enumerate(grads)]
    second = sadl.grad(sum((g * v).sum() for g, v in zip(grads, vs)), leaves, allow_unused=True)
    tsecond = torch.autograd.grad(
        sum((g * torch.from_numpy(v)).sum() for g, v in zip(tgrads, vs)), tleaves, allow_unused=True
    )
    for k, (g, tg) in enumerate(zip(second, tsecond)):
        want = np.zeros(leaves[k].shape) if tg is None else tg.numpy()
        got = np.zeros(leaves[k].shape) if g is None else g.data
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10, err_msg=f"second, leaf {k}")


@torch_required
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(
    "kwargs, with_states",
    [
        ({}, False),
        ({}, True),
        ({"num_layers": 2, "bidirectional": True}, True),
        ({"num_layers": 3, "batch_first": True}, False),
        ({"bidirectional": True, "batch_first": True, "bias": False}, True),
    ],
    ids=["plain", "states", "2-layer-bidirectional", "3-layer-batch-first", "bi-no-bias"],
)
def test_matches_torch_first_and_second_derivatives(name, kwargs, with_states):
    torch = _torch()
    layer = CLASSES[name](3, 4, rng=0, dtype=np.float64, **kwargs)
    tlayer = getattr(torch.nn, name)(3, 4, **kwargs)
    _to_torch(layer, tlayer)
    x = rand(2, 5, 3) if kwargs.get("batch_first") else rand(5, 2, 3)
    count = layer.num_layers * layer.num_directions
    states = [rand(count, 2, 4, seed=7 + k) for k in range(2 if name == "LSTM" else 1)]
    _run(layer, tlayer, x, states if with_states else [])


@torch_required
def test_relu_rnn_and_unbatched_input_match_torch():
    torch = _torch()
    layer = RNN(
        3, 4, num_layers=2, nonlinearity="relu", bidirectional=True, rng=0, dtype=np.float64
    )
    tlayer = torch.nn.RNN(3, 4, num_layers=2, nonlinearity="relu", bidirectional=True)
    _to_torch(layer, tlayer)
    _run(layer, tlayer, rand(6, 2, 3), [rand(4, 2, 4, seed=3)])
    lstm = LSTM(3, 4, num_layers=2, rng=0, dtype=np.float64)
    tlstm = torch.nn.LSTM(3, 4, num_layers=2)
    _to_torch(lstm, tlstm)
    _run(lstm, tlstm, rand(5, 3), [rand(2, 4, seed=1), rand(2, 4, seed=2)])  # (T, I) unbatched


@torch_required
@pytest.mark.parametrize("cls", [RNNCell, LSTMCell, GRUCell], ids=lambda c: c.__name__)
def test_cells_match_torch(cls):
    torch = _torch()
    cell = cls(3, 4, rng=0, dtype=np.float64)
    tcell = getattr(torch.nn, cls.__name__)(3, 4)
    _to_torch(cell, tcell)
    states = [rand(2, 4, seed=1 + k) for k in range(2 if cls is LSTMCell else 1)]
    _run(cell, tcell, rand(2, 3), states)


@torch_required
@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_state_dicts_move_both_ways_with_torch(name):
    """A torch model's state dict loads into sadl (same outputs), and sadl's into torch."""
    torch = _torch()
    kwargs = {"num_layers": 2, "bidirectional": True, "batch_first": True}
    torch.manual_seed(0)
    tlayer = getattr(torch.nn, name)(5, 6, **kwargs)
    x = np.random.default_rng(0).standard_normal((3, 7, 5)).astype(np.float32)
    with torch.no_grad():
        tout = tlayer(torch.from_numpy(x))
    layer = CLASSES[name](5, 6, rng=123, **kwargs)
    layer.load_state_dict({k: v.numpy() for k, v in tlayer.state_dict().items()})
    out = layer(x)
    np.testing.assert_allclose(out[0].data, tout[0].numpy(), rtol=1e-5, atol=1e-6)
    finals = out[1] if isinstance(out[1], tuple) else (out[1],)
    tfinals = tout[1] if isinstance(tout[1], tuple) else (tout[1],)
    for a, b in zip(finals, tfinals):
        np.testing.assert_allclose(a.data, b.numpy(), rtol=1e-5, atol=1e-6)
    # and back: sadl's freshly initialized weights into a torch layer
    mine = CLASSES[name](5, 6, rng=7, **kwargs)
    other = getattr(torch.nn, name)(5, 6, **kwargs)
    other.load_state_dict(
        {k: torch.from_numpy(np.array(v.data)) for k, v in mine.state_dict().items()}
    )
    with torch.no_grad():
        np.testing.assert_allclose(
            mine(x)[0].data, other(torch.from_numpy(x))[0].numpy(), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize(
    "op, gates", [("rnn_sequence", 1), ("lstm_sequence", 4), ("gru_sequence", 3)]
)
def test_ops_take_an_empty_batch_and_an_empty_sequence(op, gates):
    fn = getattr(sadl.ops, op)
    w_ih = sadl.Tensor(rand(gates * 4, 2), requires_grad=True)
    w_hh = sadl.Tensor(rand(gates * 4, 4), requires_grad=True)
    for shape in ((3, 0, 2), (0, 2, 2)):
        x = sadl.Tensor(rand(*shape), requires_grad=True)
        states = (None, None) if op == "lstm_sequence" else (None,)
        out = fn(x, *states, w_ih, w_hh)
        assert out.shape[-3:-1] == shape[:2]  # (..., T, B, H)
        out.sum().backward()  # nothing to propagate, and no error
        assert x.grad is None or not x.grad.any()
