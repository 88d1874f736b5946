"""rotary_embedding / RotaryEmbedding against torch: Hugging Face's rotate-half formula and
llama.cpp's adjacent-pair (complex multiplication) formula, values and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck
from sadl_layers import RotaryEmbedding, rotary_embedding
from sadl_layers.ops.rotary import rotary_tables

torch = pytest.importorskip("torch")


def _torch_rotate_half(x):
    """transformers' modeling_llama.rotate_half."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _torch_tables(head_dim, T, base):
    """transformers' LlamaRotaryEmbedding (default rope), in float64."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin(), freqs


@pytest.mark.parametrize("offset", [0, 5])
def test_rotate_half_matches_transformers_llama_formula(offset):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 8))
    cos, sin, _ = _torch_tables(8, offset + 4, 500.0)
    tx = torch.tensor(x, requires_grad=True)
    want = tx * cos[offset:] + _torch_rotate_half(tx) * sin[offset:]
    w = rng.standard_normal(want.shape)
    (want * torch.tensor(w)).sum().backward()
    sx = sadl.Tensor(x, requires_grad=True)
    got = RotaryEmbedding(8, base=500.0)(sx, offset)
    (got * w).sum().backward()
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sx.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_interleaved_matches_complex_multiplication_of_adjacent_pairs():
    """llama.cpp / Meta: (x[2i] + i x[2i+1]) * exp(i theta_i)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 6))
    _, _, freqs = _torch_tables(6, 5, 10000.0)
    tx = torch.tensor(x, requires_grad=True)
    pairs = torch.view_as_complex(tx.reshape(3, 5, 3, 2).contiguous())
    want = torch.view_as_real(pairs * torch.polar(torch.ones_like(freqs), freqs)).reshape(3, 5, 6)
    w = rng.standard_normal(want.shape)
    (want * torch.tensor(w)).sum().backward()
    sx = sadl.Tensor(x, requires_grad=True)
    got = RotaryEmbedding(6, interleaved=True)(sx)
    (got * w).sum().backward()
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sx.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_interleaved_equals_rotate_half_after_permuting_the_features():
    """The two conventions differ only by the feature order (what a GGUF loader undoes)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 8))
    perm = np.concatenate([np.arange(0, 8, 2), np.arange(1, 8, 2)])  # 0 2 4 6 1 3 5 7
    inter = RotaryEmbedding(8, interleaved=True)(x).numpy()
    half = RotaryEmbedding(8)(x[..., perm]).numpy()
    np.testing.assert_allclose(half, inter[..., perm], rtol=1e-12, atol=1e-12)


def test_float64_gradcheck_through_tables_and_input():
    cos, sin = rotary_tables(4, np.arange(3), 10.0)
    x = np.random.default_rng(3).standard_normal((2, 3, 4))
    for interleaved in (False, True):
        assert gradcheck(
            lambda a, c, s, i=interleaved: rotary_embedding(a, c, s, interleaved=i), x, cos, sin
        )


def test_float32_stays_float32_and_bad_shapes_name_the_op():
    out = RotaryEmbedding(4)(np.ones((3, 4), np.float32))
    assert out.dtype == np.float32
    with pytest.raises(ValueError, match="RotaryEmbedding"):
        RotaryEmbedding(4)(np.ones((3, 6)))
    with pytest.raises(ValueError, match="rotary_embedding: cos and sin"):
        rotary_embedding(np.ones((3, 4)), np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(5)
