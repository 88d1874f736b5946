"""Containers, parameter names, state dicts (PyTorch's load by name) and plugin registration."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
import sadl_layers
from sadl_layers import (
    BatchNorm1d,
    CausalSelfAttention,
    Embedding,
    LayerNorm,
    Linear,
    ModuleDict,
    ModuleList,
    ReLU,
    Sequential,
)
from sadl_layers.modules import LAYERS


def test_sequential_forms_slicing_and_names():
    a, b, c = Linear(2, 3, rng=0), ReLU(), Linear(3, 1, rng=1)
    s1, s2 = Sequential(a, b, c), Sequential([a, b, c])
    assert list(s1) == list(s2) == [a, b, c]
    assert s1[0] is a and s1[-1] is c
    head = s1[:2]
    assert isinstance(head, Sequential) and list(head) == [a, b]
    x = np.ones((4, 2), np.float32)
    np.testing.assert_allclose(s1(x).data, c(b(a(x))).data)
    assert [n for n, _ in s1.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    s1.append(ReLU())
    assert len(s1) == 4
    assert "(3): ReLU()" in repr(s1)


def test_module_list_insert_delete_renumber():
    blocks = ModuleList([Linear(2, 2, rng=i) for i in range(3)])
    first = blocks[0]
    blocks.insert(0, Linear(2, 2, rng=9))
    assert len(blocks) == 4 and blocks[1] is first
    del blocks[0]
    assert blocks[0] is first
    names = [n for n, _ in blocks.named_parameters()]
    assert names == [f"{i}.{p}" for i in range(3) for p in ("weight", "bias")]
    blocks[2] = Linear(2, 2, bias=False, rng=5)
    assert "2.bias" not in dict(blocks.named_parameters())
    with pytest.raises(NotImplementedError):
        blocks(np.ones(2))


def test_module_dict():
    heads = ModuleDict({"policy": Linear(4, 2, rng=0), "value": Linear(4, 1, rng=1)})
    assert heads.keys() == ["policy", "value"] and "value" in heads and len(heads) == 2
    heads["aux"] = Linear(4, 3, rng=2)
    assert list(heads) == ["policy", "value", "aux"]
    assert sorted(dict(heads.named_parameters())) == sorted(
        f"{k}.{p}" for k in ("policy", "value", "aux") for p in ("weight", "bias")
    )
    del heads["value"]
    assert "value.weight" not in dict(heads.named_parameters())
    with pytest.raises(KeyError, match="no layer named 'nope'"):
        heads["nope"]


def test_nested_names_match_a_gpt_style_layout():
    class Block(sadl.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(8)
            self.attn = CausalSelfAttention(8, 2, rng=0)

    class Model(sadl.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = Embedding(11, 8, rng=0)
            self.h = ModuleList([Block(), Block()])

    names = set(dict(Model().named_parameters()))
    assert {
        "wte.weight",
        "h.0.ln_1.weight",
        "h.1.attn.c_attn.weight",
        "h.1.attn.c_proj.bias",
    } <= names


def test_load_torch_state_dict_by_name():
    torch = pytest.importorskip("torch", reason="needs PyTorch to produce the state_dict")
    tmodel = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.ReLU(), torch.nn.Linear(8, 3)
    )
    with torch.no_grad():
        tmodel[1].weight.uniform_(0.5, 1.5)
        tmodel[1].bias.uniform_(-0.5, 0.5)
    model = Sequential(Linear(4, 8), LayerNorm(8), ReLU(), Linear(8, 3))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    expected = tmodel(torch.from_numpy(x)).detach().numpy()
    # as NumPy arrays ...
    model.load_state_dict({k: v.detach().numpy() for k, v in tmodel.state_dict().items()})
    np.testing.assert_allclose(model(x).data, expected, rtol=1e-5, atol=1e-6)
    # ... and as torch tensors directly
    fresh = Sequential(Linear(4, 8), LayerNorm(8), ReLU(), Linear(8, 3))
    fresh.load_state_dict(tmodel.state_dict())
    np.testing.assert_allclose(fresh(x).data, expected, rtol=1e-5, atol=1e-6)
    assert set(model.state_dict()) == set(tmodel.state_dict())


def test_load_torch_batchnorm_and_attention_state_dicts():
    torch = pytest.importorskip("torch", reason="needs PyTorch to produce the state_dict")
    tbn = torch.nn.BatchNorm1d(3)
    tbn(torch.randn(6, 3))
    bn = BatchNorm1d(3)
    bn.load_state_dict(tbn.state_dict())
    np.testing.assert_allclose(bn.running_mean.data, tbn.running_mean.numpy(), rtol=1e-6)
    assert int(bn.num_batches_tracked.data) == 1
    tmha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    mha = sadl_layers.MultiHeadAttention(8, 2)
    mha.load_state_dict(tmha.state_dict())
    assert set(mha.state_dict()) == set(tmha.state_dict())


def test_state_dict_roundtrip_and_shape_check():
    a, b = Linear(3, 2, rng=0), Linear(3, 2, rng=1)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    with pytest.raises(ValueError, match="'weight' has shape"):
        Linear(4, 2).load_state_dict(a.state_dict())


def test_to_float64_casts_parameters_and_float_buffers_only():
    bn = BatchNorm1d(2).to(dtype=np.float64)
    assert bn.weight.dtype == np.float64 and bn.running_mean.dtype == np.float64
    assert bn.num_batches_tracked.dtype == np.int64


def test_train_eval_propagates():
    model = Sequential(Linear(2, 2), sadl_layers.Dropout(0.5), BatchNorm1d(2))
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())


def test_every_layer_is_registered_and_reachable():
    names = set(sadl.nn.names())
    for name, cls in LAYERS.items():
        assert name in names
        assert getattr(sadl.nn, name) is cls
        assert getattr(sadl, name) is cls
        assert getattr(sadl_layers, name) is cls
        assert cls.__doc__, name
    info = next(p for p in sadl.plugins.plugins() if p["distribution"] == "sadl-layers")
    assert info["status"] == "ok"
    assert set(info["provides"]["register_layers"]) == set(LAYERS)


def test_public_names_have_docstrings():
    for name in sadl_layers.__all__:
        obj = getattr(sadl_layers, name)
        doc = getattr(obj, "doc", None) or obj.__doc__
        assert doc and doc.strip(), name


def test_readme_example_runs():
    """The package README's example is real code (docs examples must not drift)."""
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S)
    assert code is not None
    namespace: dict = {}
    exec(code.group(1), namespace)
    assert np.isfinite(namespace["loss"].item())
