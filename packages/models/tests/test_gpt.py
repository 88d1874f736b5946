from __future__ import annotations

import numpy as np
import pytest
import sadl
from sadl.testing import gradcheck
from sadl_models.gpt import GPT, sample_next

TINY = {"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 8}


def tiny(**kw):
    return GPT(**{**TINY, **kw}, rng=0)


def ids(shape, vocab=11, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=shape)


def test_parameter_names_follow_nanogpt_and_lm_head_is_tied():
    model = tiny()
    names = [n for n, _ in model.named_parameters()]
    assert names[:2] == ["transformer.wte.weight", "transformer.wpe.weight"]
    assert "transformer.h.0.ln_1.weight" in names
    assert "transformer.h.1.attn.c_attn.weight" in names
    assert "transformer.h.1.attn.c_proj.bias" in names
    assert "transformer.h.0.mlp.c_fc.weight" in names
    assert "transformer.h.0.mlp.c_proj.weight" in names
    assert "transformer.ln_f.bias" in names
    assert "lm_head.weight" not in names  # the tied weight appears once, as wte
    assert model.lm_head.weight is model.transformer.wte.weight
    params = list(model.parameters())
    assert sum(p is model.transformer.wte.weight for p in params) == 1
    opt = sadl.optim.AdamW(params, lr=1e-3)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(names)


def test_gpt2_init_statistics():
    model = GPT(vocab_size=50, block_size=64, n_layer=4, n_head=4, n_embd=64, rng=1)
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    assert sd["transformer.wte.weight"].std() == pytest.approx(0.02, rel=0.05)
    assert sd["transformer.h.0.mlp.c_fc.weight"].std() == pytest.approx(0.02, rel=0.05)
    resid = 0.02 / np.sqrt(2 * 4)
    assert sd["transformer.h.3.mlp.c_proj.weight"].std() == pytest.approx(resid, rel=0.05)
    assert sd["transformer.h.0.attn.c_proj.weight"].std() == pytest.approx(resid, rel=0.1)
    assert np.all(sd["transformer.h.0.attn.c_attn.bias"] == 0)
    assert np.all(sd["transformer.h.0.ln_1.weight"] == 1)
    assert all(v.dtype == np.float32 for v in sd.values())
    # Same seed, same weights.
    again = GPT(vocab_size=50, block_size=64, n_layer=4, n_head=4, n_embd=64, rng=1)
    assert all(np.array_equal(v.numpy(), sd[k]) for k, v in again.state_dict().items())


def test_forward_shapes_and_loss_at_init_is_near_uniform():
    model = GPT(vocab_size=65, block_size=16, n_layer=2, n_head=4, n_embd=32, rng=0)
    x = ids((3, 16), 65)
    logits, loss = model(x, ids((3, 16), 65, seed=1))
    assert logits.shape == (3, 16, 65)
    assert loss.shape == ()
    assert float(loss.item()) == pytest.approx(np.log(65), abs=0.05)
    logits, none = model(x[:, :5])
    assert logits.shape == (3, 5, 65) and none is None


def test_bad_inputs_raise_clear_errors():
    model = tiny()
    with pytest.raises(ValueError, match="longer than the block size 8"):
        model(ids((1, 9)))
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 11\)"):
        model(np.array([[0, 11]]))
    with pytest.raises(TypeError, match="integer token ids"):
        model(np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=r"shape \(batch, time\)"):
        model(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="targets must have the shape"):
        model(ids((2, 4)), ids((2, 5)))
    with pytest.raises(ValueError, match="divisible"):
        GPT(11, 8, 1, 3, 8)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        GPT(11, 0, 1, 2, 8)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(ids((1, 2)), 3, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(ids((1, 2)), 3, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        model.generate(ids((1, 2)), 3, top_p=1.5)


def test_registered_as_model_and_layer():
    assert sadl.nn.GPT is GPT
    model = sadl.models.create("gpt", vocab_size=7, block_size=4, n_layer=1, n_head=1, n_embd=4)
    assert isinstance(model, GPT) and model.vocab_size == 7
    mlp = sadl.models.create("mlp", in_features=2, out_features=3)
    assert mlp(np.zeros((5, 2), dtype=np.float32)).shape == (5, 3)


def test_gradcheck_tiny_gpt_float64():
    model = GPT(vocab_size=7, block_size=5, n_layer=1, n_head=2, n_embd=4, rng=3)
    model.to(dtype=np.float64)
    x, y = ids((2, 5), 7), ids((2, 5), 7, seed=2)
    attn = model.transformer.h[0].attn
    mlp = model.transformer.h[0].mlp
    originals = (model.transformer.wte.weight, attn.c_attn.weight, mlp.c_fc.bias)

    def loss_of(wte, c_attn, c_fc_bias):
        model.transformer.wte.weight = wte
        model.lm_head.weight = wte  # keep the tie: the gradient sums both uses
        attn.c_attn.weight = c_attn
        mlp.c_fc.bias = c_fc_bias
        try:
            return model(x, y)[1]
        finally:
            model.transformer.wte.weight, attn.c_attn.weight, mlp.c_fc.bias = originals
            model.lm_head.weight = originals[0]

    assert gradcheck(loss_of, *(p.numpy().copy() for p in originals))


def test_kv_cache_generates_exactly_the_same_tokens_greedy():
    model = GPT(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16, rng=5)
    prompt = ids((2, 3), 13)
    # 20 new tokens with a block of 8: the window slides several times.
    cached = model.generate(prompt, 20, top_k=1, use_cache=True)
    plain = model.generate(prompt, 20, top_k=1, use_cache=False)
    assert cached.shape == (2, 23)
    assert np.array_equal(cached[:, :3], prompt)
    assert np.array_equal(cached, plain)
    assert np.array_equal(model.generate(prompt, 20, temperature=0), cached)


def test_kv_cache_matches_full_forward_logits():
    """The incremental (cached) pass reproduces the last-position logits of a full forward."""
    model = GPT(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16, rng=6)
    seq = ids((1, 6), 13)
    with sadl.no_grad():
        from sadl_layers.ops import linear
        from sadl_models.gpt import KVCache

        cache = KVCache(2, 1, 2, 8, 8, model.lm_head.weight.data)
        model._trunk(seq[:, :5], 0, cache)
        cache.length = 5
        x = model._trunk(seq[:, 5:6], 5, cache)
        incremental = linear(x[:, -1, :], model.lm_head.weight, None).numpy()
        full = model(seq)[0].numpy()[:, -1, :]
    np.testing.assert_allclose(incremental, full, rtol=1e-5, atol=1e-6)


def test_sampled_generation_is_reproducible_and_cache_agnostic():
    model = GPT(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8, rng=2)
    prompt = ids((1, 2), 13)
    a = model.generate(prompt, 12, temperature=0.9, top_k=5, rng=np.random.default_rng(3))
    b = model.generate(prompt, 12, temperature=0.9, top_k=5, rng=np.random.default_rng(3))
    c = model.generate(
        prompt, 12, temperature=0.9, top_k=5, rng=np.random.default_rng(3), use_cache=False
    )
    assert np.array_equal(a, b) and np.array_equal(a, c)
    one_d = model.generate(prompt[0], 4, top_k=1)
    assert one_d.shape == (6,)
    assert model.training  # generate restores the mode


def test_sample_next_top_k_and_top_p():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    rng = np.random.default_rng(0)
    draws = np.array([sample_next(logits, 1.0, top_k=2, rng=rng)[0] for _ in range(400)])
    assert set(draws.tolist()) == {0, 1}
    draws = np.array([sample_next(logits, 1.0, top_p=0.7, rng=rng)[0] for _ in range(400)])
    assert set(draws.tolist()) == {0, 1}  # 0.5 < 0.7, so the second token is kept too
    draws = np.array([sample_next(logits, 1.0, top_p=0.5, rng=rng)[0] for _ in range(50)])
    assert set(draws.tolist()) == {0}
    draws = np.array([sample_next(logits, 1.0, rng=rng)[0] for _ in range(4000)])
    freq = np.bincount(draws, minlength=4) / 4000
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.15, 0.05], atol=0.03)
    assert sample_next(logits, 0.0)[0] == 0


def test_dropout_is_active_in_training_only():
    model = GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, dropout=0.5, rng=0)
    x = ids((2, 8))
    a, _ = model(x)
    b, _ = model(x)
    assert not np.array_equal(a.numpy(), b.numpy())
    model.eval()
    c, _ = model(x)
    d, _ = model(x)
    assert np.array_equal(c.numpy(), d.numpy())


@pytest.mark.torch
def test_forward_backward_match_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch is the reference for this parity test")
    from torch_gpt import TorchGPT, copy_into_torch

    cfg = {"vocab_size": 17, "block_size": 12, "n_layer": 2, "n_head": 4, "n_embd": 16}
    model = GPT(**cfg, rng=0)
    ref = TorchGPT(**cfg).double()
    model.to(dtype=np.float64)
    copy_into_torch(model, ref)
    x, y = ids((3, 12), 17), ids((3, 12), 17, seed=9)
    logits, loss = model(x, y)
    t_logits, t_loss = ref(torch.from_numpy(x), torch.from_numpy(y))
    np.testing.assert_allclose(logits.numpy(), t_logits.detach().numpy(), rtol=1e-9, atol=1e-10)
    assert float(loss.item()) == pytest.approx(float(t_loss.item()), rel=1e-10)
    loss.backward()
    t_loss.backward()
    t_grads = {n: p.grad.numpy() for n, p in ref.named_parameters()}
    for name, p in model.named_parameters():
        np.testing.assert_allclose(
            np.asarray(p.grad), t_grads[name], rtol=1e-7, atol=1e-10, err_msg=name
        )


@pytest.mark.torch
def test_loads_a_pytorch_state_dict_by_name():
    torch = pytest.importorskip("torch", reason="PyTorch is the reference for this parity test")
    from torch_gpt import TorchGPT

    cfg = {"vocab_size": 17, "block_size": 12, "n_layer": 2, "n_head": 4, "n_embd": 16}
    torch.manual_seed(0)
    ref = TorchGPT(**cfg)
    model = GPT(**cfg, rng=1)
    model.load_state_dict(ref.state_dict())  # includes the tied lm_head.weight
    x = ids((2, 12), 17)
    with torch.no_grad():
        expected = ref(torch.from_numpy(x))[0].numpy()
    np.testing.assert_allclose(model(x)[0].numpy(), expected, rtol=1e-4, atol=1e-5)
    state = {k: v.clone() for k, v in ref.state_dict().items()}
    state["lm_head.weight"] = state["lm_head.weight"] + 1
    with pytest.raises(ValueError, match="lm_head.weight differs"):
        model.load_state_dict(state)


def _first_attention():
    return GPT(vocab_size=11, block_size=5, n_layer=1, n_head=2, n_embd=4).transformer.h[0].attn


def test_attention_is_sadl_layers_packed_op(monkeypatch):
    """GPT attends with sadl-layers' ``CausalSelfAttention`` and its ``attention_qkv`` (whose
    gradients check_op checks): the same values as splitting the heads by hand and calling
    ``scaled_dot_product_attention``."""
    import sadl_layers
    import sadl_layers.ops.attention
    from sadl_layers.ops import attention_qkv, scaled_dot_product_attention

    assert type(_first_attention()) is sadl_layers.CausalSelfAttention
    calls = []
    monkeypatch.setattr(
        sadl_layers.ops.attention,
        "attention_qkv",
        lambda qkv, **p: calls.append(p) or attention_qkv(qkv, **p),
    )
    GPT(vocab_size=11, block_size=5, n_layer=1, n_head=2, n_embd=4, rng=0)(ids((2, 5)))
    assert calls == [{"n_head": 2, "causal": True, "dropout_mask": None}]

    qkv = np.random.default_rng(0).standard_normal((2, 5, 12))
    out = attention_qkv(qkv, n_head=2)
    q, k, v = (
        qkv[..., i * 4 : (i + 1) * 4].reshape(2, 5, 2, 2).transpose(0, 2, 1, 3) for i in range(3)
    )
    ref = scaled_dot_product_attention(q, k, v, causal=True).transpose(0, 2, 1, 3).reshape(2, 5, 4)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_kv_cache_feeds_one_position_per_new_token():
    model = GPT(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8, rng=4)
    seen = []
    trunk = model._trunk

    def spy(ids, pos_start, cache):
        seen.append((ids.shape[1], pos_start, cache is not None))
        return trunk(ids, pos_start, cache)

    model._trunk = spy
    model.generate(ids((1, 3), 13), 10, top_k=1)
    # Prefill the 3-token prompt, then one position per token until the window (8) is full,
    # then re-encode the kept half (4 tokens) once and continue one position at a time.
    assert seen == [
        (3, 0, True), (1, 3, True), (1, 4, True), (1, 5, True), (1, 6, True), (1, 7, True),
        (4, 0, True), (1, 4, True), (1, 5, True), (1, 6, True),
    ]  # fmt: skip
    seen.clear()
    model.generate(ids((1, 3), 13), 3, top_k=1, use_cache=False)
    assert seen == [(3, 0, False), (4, 0, False), (5, 0, False)]
