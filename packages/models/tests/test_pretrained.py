"""load_pretrained on tiny random checkpoints written here by transformers and gguf: logits,
greedy continuations, hidden states and sentence embeddings equal transformers'; the loaded
model trains and saves like any Module; tokenizers built from GGUF metadata equal the
tokenizer.json they came from."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import sadl

pytest.importorskip("tokenizers", reason="load_pretrained needs sadl-models[pretrained]")
torch = pytest.importorskip("torch", reason="the reference is transformers on torch")
transformers = pytest.importorskip("transformers", reason="the reference is transformers")

from pretrained_fixtures import (  # noqa: E402
    TRAIN_LINES,
    bert_dir,
    byte_level_bpe,
    llama_dir,
    write_gguf,
)
from sadl_models.pretrained import BertModel, LlamaForCausalLM, load_pretrained  # noqa: E402

LINES = [
    "Hello world",
    "numbers 1234567 and 3.14159, 10,000,000!",
    "  leading and trailing spaces   ",
    "tabs\tand\nnew lines\n\n",
    "def f(x):\n    return x ** 2  # square",
    "Ünïcödé 東京 🙂 naïve café — ok",
    "<|im_start|>user\nhi<|im_end|>",
    "",
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("llama"))
    return path, llama_dir(path, tied=True, kv_heads=2)


def _hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def test_hf_llama_logits_and_greedy_match_transformers(llama):
    path, ref = llama
    model, tok = load_pretrained(path)
    assert isinstance(model, LlamaForCausalLM) and model.config.tie_word_embeddings
    assert model.config.num_key_value_heads == 2 and model.config.rope_theta == 500.0
    ids = [tok.encode(t) for t in ("The quick brown fox", "def add(a, b): 1234")]
    for row in ids:
        logits = model(np.array([row]))
        assert isinstance(logits, sadl.Tensor) and logits.dtype == np.float32
        np.testing.assert_allclose(logits.numpy(), _hf_logits(ref, [row]), atol=2e-5, rtol=0)
        out = model.generate(row, 12, temperature=0.0)
        with torch.no_grad():
            want = ref.generate(torch.tensor([row]), max_new_tokens=12, do_sample=False,
                                eos_token_id=None, pad_token_id=0)  # fmt: skip
        assert out.tolist() == want[0].tolist()


def test_batch_padded_on_the_right_gives_each_prompt_its_own_logits(llama):
    path, ref = llama
    model, tok = load_pretrained(path)
    a, b = tok.encode("The quick brown fox jumps"), tok.encode("pi")
    batch = np.zeros((2, len(a)), dtype=np.int64)
    batch[0], batch[1, : len(b)] = a, b
    logits = model(batch)
    assert isinstance(logits, sadl.Tensor) and logits.shape == (2, len(a), model.config.vocab_size)
    np.testing.assert_allclose(logits.numpy()[1, : len(b)], _hf_logits(ref, [b])[0], atol=2e-5)
    np.testing.assert_allclose(logits.numpy()[0], _hf_logits(ref, [a])[0], atol=2e-5)


def test_untied_output_head_and_full_multi_head_attention(tmp_path):
    ref = llama_dir(str(tmp_path), tied=False, kv_heads=4, seed=1)
    model, tok = load_pretrained(str(tmp_path))
    assert model.lm_head is not None and not model.config.tie_word_embeddings
    ids = [tok.encode("In 1969, 600 million people")]
    np.testing.assert_allclose(model(np.array(ids)).numpy(), _hf_logits(ref, ids), atol=2e-5)


def test_kv_cache_generation_equals_recomputing_the_whole_context(llama):
    path, _ = llama
    model, tok = load_pretrained(path)
    ids = tok.encode("The lazy dog")
    out = model.generate(ids, 6)
    seq = list(ids)
    for _ in range(6):  # no cache: the full context every step
        seq.append(int(np.argmax(model(np.array([seq])).numpy()[0, -1])))
    assert out.tolist() == seq
    sampled = model.generate(ids, 6, temperature=0.9, top_k=20, top_p=0.9, rng=3)
    assert sampled.tolist() == model.generate(ids, 6, temperature=0.9, top_k=20, top_p=0.9,
                                              rng=3).tolist()  # fmt: skip


def test_loaded_model_trains_saves_and_loads_back_as_an_ordinary_module(llama, tmp_path):
    from sadl_layers.ops import cross_entropy

    path, ref = llama
    model, tok = load_pretrained(path)
    ids = np.array([tok.encode(TRAIN_LINES[0])])
    optimizer = sadl.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    losses = []
    for _ in range(3):
        logits = model(ids[:, :-1])
        loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    assert losses[-1] < losses[0]
    # the same first loss as transformers with the same weights
    with torch.no_grad():
        want = ref(torch.tensor(ids), labels=torch.tensor(ids)).loss.item()
    assert abs(losses[0] - want) < 1e-5
    sadl.save(model.state_dict(), str(tmp_path / "tuned.safetensors"))
    fresh, _ = load_pretrained(path)
    fresh.load_state_dict(sadl.load(str(tmp_path / "tuned.safetensors")))
    np.testing.assert_array_equal(fresh(ids).numpy(), model.eval()(ids).numpy())


def test_chat_template_and_tokenizer_round_trip(llama):
    path, _ = llama
    _, tok = load_pretrained(path)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tok.encode(text)
    assert ids[0] == tok.token_id("<|im_start|>") and tok.decode(ids) == text
    assert tok.eos_token_id == tok.token_id("<|im_end|>")


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0", "Q4_0", "Q4_1"])
def test_gguf_logits_match_transformers_on_the_stored_weights(llama, tmp_path, qtype):
    """The file stores Q/K permuted for llama.cpp's RoPE: unpermuted at load, the logits equal
    transformers' on the same (dequantized) weights."""
    pytest.importorskip("gguf")
    path, ref = llama
    gguf_path = str(tmp_path / f"tiny-{qtype}.gguf")
    stored = write_gguf(gguf_path, ref, byte_level_bpe(), qtype=qtype)
    model, tok = load_pretrained(gguf_path)
    ref_q = transformers.LlamaForCausalLM(ref.config).eval()
    ref_q.load_state_dict({k: torch.tensor(v) for k, v in stored.items()}, strict=False)
    ref_q.tie_weights()
    ids = [tok.encode("def add(a, b):\n    return a + b  # 42")]
    np.testing.assert_allclose(model(np.array(ids)).numpy(), _hf_logits(ref_q, ids), atol=2e-5)


def test_gguf_tokenizer_follows_the_declared_smollm_pre_tokenizer(llama, tmp_path):
    """Built from the file's metadata, it equals the tokenizer.json it came from (digits split
    first, then GPT-2's pattern), ids and decoded text, on varied lines."""
    pytest.importorskip("gguf")
    _, ref = llama
    source = byte_level_bpe()
    gguf_path = str(tmp_path / "tok.gguf")
    write_gguf(gguf_path, ref, source)
    _, tok = load_pretrained(gguf_path)
    rng = np.random.default_rng(0)
    pieces = LINES + TRAIN_LINES + ["9" * 12, "a  b   c    d", "x\r\ny", "'s 're 've"]
    lines = pieces + [" ".join(rng.choice(pieces, size=3)) for _ in range(200)]
    for line in lines:
        want = source.encode(line).ids
        assert tok.encode(line) == want, line
        assert tok.decode(want) == source.decode(want, skip_special_tokens=False), line


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bert"))
    return path, bert_dir(path)


def test_bert_hidden_states_and_mean_pooled_embeddings_match_transformers(bert):
    path, ref = bert
    model, tok = load_pretrained(path)
    assert isinstance(model, BertModel) and model.pooling == "mean" and model.normalize
    assert model.max_seq_length == 16
    texts = ["the quick brown fox", "1969 café", "a much longer sentence about the lazy dog " * 3]
    got = model.embed(texts).numpy()
    assert got.shape == (3, 24)
    for i, text in enumerate(texts):
        ids = tok.encode(text, max_length=16)
        assert ids[0] == tok.token_id("[CLS]") and ids[-1] == tok.token_id("[SEP]")
        with torch.no_grad():
            h = ref(torch.tensor([ids])).last_hidden_state
        np.testing.assert_allclose(model(np.array([ids])).numpy(), h.numpy(), atol=2e-5)
        pooled = h.mean(1)[0].numpy()
        np.testing.assert_allclose(got[i], pooled / np.linalg.norm(pooled), atol=2e-6)


def test_bert_encode_ignores_padding_stored_in_tokenizer_json(bert):
    path, _ = bert
    _, tok = load_pretrained(path)
    ids = tok.encode("the fox")  # the file pads to 128: encode returns the text's ids only
    assert len(ids) < 10 and tok.token_id("[PAD]") not in ids


# ---------------------------------------------------------------------------- bad input


def _gguf_file(llama, tmp_path, **kw):
    pytest.importorskip("gguf")
    path = str(tmp_path / "m.gguf")
    write_gguf(path, llama[1], byte_level_bpe(), **kw)
    return path


def test_truncated_gguf_names_the_file(llama, tmp_path):
    from sadl_serialize import SadlFormatError

    path = _gguf_file(llama, tmp_path)
    data = Path(path).read_bytes()
    for cut in (len(data) - 100, len(data) // 3, 40):
        Path(path).write_bytes(data[:cut])
        with pytest.raises(SadlFormatError, match=r"m\.gguf.*(truncated|cannot parse)"):
            load_pretrained(path)


def test_unknown_gguf_architecture_and_unsupported_quantization_are_refused(llama, tmp_path):
    from sadl_models.pretrained import PretrainedLoadError
    from sadl_serialize import SadlFormatError

    with pytest.raises(PretrainedLoadError, match="unknown architecture 'gpt2'"):
        load_pretrained(_gguf_file(llama, tmp_path, arch="gpt2"))
    with pytest.raises(SadlFormatError, match="unsupported type Q5_0"):
        load_pretrained(_gguf_file(llama, tmp_path, qtype="Q5_0"))


def test_gguf_without_tokenizer_or_with_stray_tensor_is_refused(llama, tmp_path):
    from sadl_models.pretrained import PretrainedLoadError, TokenizerLoadError

    with pytest.raises(TokenizerLoadError, match=r"m\.gguf.*no tokenizer"):
        load_pretrained(_gguf_file(llama, tmp_path, with_tokenizer=False))
    with pytest.raises(PretrainedLoadError, match="does not know: blk.0.attn_q_norm.weight"):
        load_pretrained(_gguf_file(llama, tmp_path, extra_tensor="blk.0.attn_q_norm.weight"))


def test_gguf_header_not_matching_its_weights_names_the_file_and_the_tensor(llama, tmp_path):
    from sadl_models.pretrained import PretrainedLoadError

    path = _gguf_file(llama, tmp_path, feed_forward_length=96)
    with pytest.raises(
        PretrainedLoadError,
        match=r"m\.gguf: the weights do not match the config.*"
        r"mlp\.down_proj\.weight: file \(32, 64\), config \(32, 96\)",
    ):
        load_pretrained(path)


def test_hf_config_not_matching_weights_unknown_type_and_missing_tokenizer(tmp_path):
    import json

    from sadl_models.pretrained import PretrainedLoadError, TokenizerLoadError

    path = str(tmp_path)
    llama_dir(path, seed=2)
    config_path = os.path.join(path, "config.json")
    config = json.loads(Path(config_path).read_text())
    Path(config_path).write_text(json.dumps({**config, "intermediate_size": 96}))
    with pytest.raises(
        PretrainedLoadError,
        match=r"model\.safetensors: the weights do not match "
        r"the config.*mlp\.down_proj\.weight: file \(32, 64\), config \(32, 96\)",
    ):
        load_pretrained(path)
    Path(config_path).write_text(json.dumps({**config, "model_type": "t5"}))
    with pytest.raises(PretrainedLoadError, match=r"config\.json: unknown architecture.*'t5'"):
        load_pretrained(path)
    Path(config_path).write_text(json.dumps(config))
    os.remove(os.path.join(path, "tokenizer.json"))
    with pytest.raises(TokenizerLoadError, match=r"tokenizer\.json: missing"):
        load_pretrained(path)


def test_sharded_safetensors_directory_loads(llama, tmp_path):
    import json
    import shutil

    from sadl_serialize import load_safetensors, save_safetensors

    src, ref = llama
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, name), tmp_path / name)
    weights = load_safetensors(os.path.join(src, "model.safetensors"))
    keys = sorted(weights)
    half = len(keys) // 2
    shards = {"model-00001-of-00002.safetensors": keys[:half],
              "model-00002-of-00002.safetensors": keys[half:]}  # fmt: skip
    for name, ks in shards.items():
        save_safetensors({k: weights[k] for k in ks}, str(tmp_path / name))
    index = {"weight_map": {k: name for name, ks in shards.items() for k in ks}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    model, tok = load_pretrained(str(tmp_path))
    ids = [tok.encode("The quick brown fox")]
    np.testing.assert_allclose(model(np.array(ids)).numpy(), _hf_logits(ref, ids), atol=2e-5)


def test_k_quant_types_dequantize_as_ggufs_own_reader(tmp_path):
    gguf = pytest.importorskip("gguf")
    from sadl_serialize.gguf_format import load_gguf

    rng = np.random.default_rng(0)
    path = str(tmp_path / "k.gguf")
    w = gguf.GGUFWriter(path, "llama")
    raws = {}
    for kind in ("Q4_K", "Q6_K"):
        qtype = gguf.GGMLQuantizationType[kind]
        block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(2, nbytes), dtype=np.uint8)
        for row in raw:  # f16 scales in a sane range so the values are finite
            scale = np.array([0.01], np.float16).view(np.uint8)
            if kind == "Q4_K":
                row[0:2], row[2:4] = scale, scale
            else:
                row[-2:] = scale
        raws[kind] = raw
        w.add_tensor(kind.lower(), raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    loaded = load_gguf(path)
    for kind, raw in raws.items():
        want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind])
        got = loaded[kind.lower()].numpy()
        assert got.dtype == np.float32 and got.shape == (2, 256) and np.isfinite(got).all()
        np.testing.assert_array_equal(got, want.reshape(2, 256))


def test_fine_tuning_matches_torch_adamw_eager_and_compiled(llama):
    """10 AdamW steps from the loaded weights: the losses follow transformers + torch's, and a
    sadl.compile'd step (fusion off) gives exactly the eager losses."""
    from sadl_layers.ops import cross_entropy
    from sadl_optim import AdamW

    path, ref = llama
    ids = np.array([byte_level_bpe().encode(TRAIN_LINES[2]).ids[:24]])
    hp = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}

    def run(compiled):
        model, _ = load_pretrained(path)
        model.train()
        opt = AdamW(model.parameters(), **hp)

        def step(x, y):
            logits = model(x)
            loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        fn = sadl.compile(step, fusion=False) if compiled else step
        return [float(fn(ids[:, :-1], ids[:, 1:]).item()) for _ in range(10)]

    eager, compiled = run(False), run(True)
    assert compiled == eager
    tref = transformers.LlamaForCausalLM(ref.config)
    tref.load_state_dict(ref.state_dict())
    tref.train()
    topt = torch.optim.AdamW(tref.parameters(), **hp)
    want = []
    for _ in range(10):
        loss = tref(torch.tensor(ids), labels=torch.tensor(ids)).loss
        topt.zero_grad()
        loss.backward()
        topt.step()
        want.append(loss.item())
    np.testing.assert_allclose(eager, want, rtol=1e-4)
