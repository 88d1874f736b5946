"""Function/Module: parameter discovery, modes, state dicts, both forward contracts."""

import numpy as np
import pytest
import sadl
from sadl import Parameter


class Affine(sadl.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = Parameter(np.ones((n_out, n_in), np.float32))
        self.bias = Parameter(np.zeros(n_out, np.float32))

    def forward(self, x):
        return x @ self.weight.T + self.bias


class SadlStyle(sadl.Function):
    # SADL's contract: forward as __call__, no super().__init__() needed.
    def __init__(self):
        self.w = Parameter(np.full(2, 3.0, np.float32))

    def __call__(self, x):
        return x * self.w


class Net(sadl.Module):
    def __init__(self):
        super().__init__()
        self.first = Affine(2, 3)
        self.blocks = [Affine(3, 3), Affine(3, 3)]
        self.heads = {"a": Affine(3, 1)}
        self.shared = self.first  # the same layer twice: its parameters appear once
        self.register_buffer("steps", sadl.tensor([0.0]))
        self.register_buffer("cache", sadl.tensor([1.0]), persistent=False)

    def forward(self, x):
        for block in [self.first, *self.blocks, self.heads["a"]]:
            x = block(x)
        return x


def test_parameter_discovery_with_dotted_names():
    names = [n for n, _ in Net().named_parameters()]
    assert names == [
        "first.weight",
        "first.bias",
        "blocks.0.weight",
        "blocks.0.bias",
        "blocks.1.weight",
        "blocks.1.bias",
        "heads.a.weight",
        "heads.a.bias",
    ]
    assert len(Net().get_parameters()) == 8
    assert Net().num_parameters() == 6 + 3 + 12 + 12 + 3 + 1


def test_sadl_style_call_contract():
    layer = SadlStyle()
    out = layer(sadl.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(out.data, [3.0, 6.0])
    assert len(layer.get_parameters()) == 1 and layer.training


def test_missing_forward_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="neither forward"):
        sadl.Module()(1)


def test_train_eval_recurse():
    net = Net().eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_state_dict_round_trip_and_strictness():
    net, other = Net(), Net()
    for p in net.parameters():
        p.data[...] = np.random.default_rng(0).normal(size=p.shape)
    sd = net.state_dict()
    assert "steps" in sd and "cache" not in sd and "shared.weight" not in sd
    other.load_state_dict({k: v.numpy() for k, v in sd.items()})
    for (n1, p1), (n2, p2) in zip(net.named_parameters(), other.named_parameters()):
        assert n1 == n2
        np.testing.assert_array_equal(p1.data, p2.data)
    with pytest.raises(KeyError, match="missing keys"):
        other.load_state_dict({"first.weight": sd["first.weight"]})
    result = other.load_state_dict({"first.weight": sd["first.weight"], "extra": 1}, strict=False)
    assert "extra" in result.unexpected_keys and "first.bias" in result.missing_keys
    with pytest.raises(ValueError, match="first.weight.*shape"):
        other.load_state_dict({**sd, "first.weight": np.zeros((9, 9))})


def test_load_state_dict_keeps_parameter_identity_and_dtype():
    net = Affine(2, 2)
    before = net.weight
    data_before = net.weight.data
    net.load_state_dict({"weight": np.full((2, 2), 2.0), "bias": [1.0, 1.0]})
    assert net.weight is before and net.weight.data is data_before
    assert net.weight.dtype == np.float32


def test_zero_grad_and_to():
    net = Affine(2, 2)
    net(sadl.ones(1, 2)).sum().backward()
    assert net.weight.grad is not None
    net.zero_grad()
    assert net.weight.grad is None
    net.to(dtype=np.float64)
    assert net.weight.dtype == np.float64
    net.to("cpu")


def test_repr_lists_children():
    text = repr(Net())
    assert "(first): Affine" in text and "(blocks.0): Affine" in text
