"""The device matrix for the pretrained architectures: a Llama decoder and a BERT encoder moved
with ``.to(device)`` give the CPU's logits, greedy tokens and hidden states ("strict" is the
strict CuPy stand-in, so these paths run in every CI run)."""

from __future__ import annotations

import copy

import numpy as np
from sadl.testing import assert_close
from sadl_models.pretrained import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM


def _randomized(model):
    """Norm weights away from one, so that they matter."""
    rng = np.random.default_rng(0)
    for name, p in model.named_parameters():
        if "norm" in name.lower():
            p.data[...] = 1.0 + 0.1 * rng.standard_normal(p.shape).astype(p.dtype)
    return model


def test_llama_logits_and_kv_cache_generation_on_device(device):
    config = LlamaConfig(vocab_size=13, hidden_size=8, intermediate_size=12, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, rope_theta=50.0,
                         tie_word_embeddings=True)  # fmt: skip
    cpu = _randomized(LlamaForCausalLM(config)).eval()
    there = copy.deepcopy(cpu).to(device)
    ids = np.random.default_rng(1).integers(0, 13, (2, 5))
    logits = there(ids)
    assert logits.device == there.output_weight.device  # the logits stay where the model is
    assert_close(logits, cpu(ids), device=device)
    np.testing.assert_array_equal(there.generate(ids[0], 6), cpu.generate(ids[0], 6))


def test_bert_hidden_states_on_device(device):
    config = BertConfig(vocab_size=17, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=12, max_position_embeddings=16)  # fmt: skip
    cpu = _randomized(BertModel(config)).eval()
    there = copy.deepcopy(cpu).to(device)
    ids = np.random.default_rng(2).integers(0, 17, (2, 6))
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    assert_close(there(ids, mask), cpu(ids, mask), device=device)
