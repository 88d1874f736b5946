"""A character-level LSTM language model on the built-in corpus (no download).

The corpus is CPython's own ``pydoc_data.topics`` (``sadl_models.corpus.builtin_corpus``), one
token per character. The model is PyTorch's classic char-RNN: Embedding -> LSTM -> Linear, with
the hidden state carried across nothing (random windows), trained with Adam and gradient
clipping on next-character cross-entropy. It must beat the unigram baseline (predicting every
character from its frequency alone) on held-out text, and then writes a sample, one character
at a time, feeding the LSTM its own state.

Run: python docs/examples/char_lstm.py [--steps 1500]   (the default is short, for the tests)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import sadl
from sadl_models.corpus import builtin_corpus, split_tokens, unigram_cross_entropy
from sadl_models.tokenizers import CharTokenizer


class CharLSTM(sadl.nn.Module):
    """Embedding -> LSTM -> Linear over characters."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int, rng: int) -> None:
        super().__init__()
        self.embed = sadl.nn.Embedding(vocab, embed, rng=rng)
        self.lstm = sadl.nn.LSTM(embed, hidden, num_layers=layers, batch_first=True, rng=rng + 1)
        self.head = sadl.nn.Linear(hidden, vocab, rng=rng + 2)

    def forward(self, ids, state=None):
        """Logits (batch, time, vocab) and the LSTM's final (h, c)."""
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def evaluate(model, tokens, block, batches, rng) -> float:
    """Mean cross-entropy (nats/char) over random windows of ``tokens``."""
    model.eval()
    with sadl.no_grad():
        losses = []
        for _ in range(batches):
            x, y = sadl.data.windows(tokens, block, 32, rng)
            logits, _ = model(x)
            losses.append(sadl.ops.cross_entropy(logits, y).item())
    model.train()
    return float(np.mean(losses))


def sample(model, tokenizer, prompt: str, length: int, rng) -> str:
    """Continue ``prompt`` one character at a time, carrying the LSTM state."""
    model.eval()
    with sadl.no_grad():
        ids = tokenizer.encode(prompt)[None, :]
        logits, state = model(ids)
        out = list(prompt)
        for _ in range(length):
            z = logits.data[0, -1].astype(np.float64) / 0.8
            p = np.exp(z - z.max())
            nxt = int(rng.choice(len(p), p=p / p.sum()))
            out.append(tokenizer.decode(np.array([nxt])))
            logits, state = model(np.array([[nxt]]), state)
    model.train()
    return "".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--hidden", type=int, default=128)
    args = parser.parse_args()

    sadl.manual_seed(0)
    rng = np.random.default_rng(0)
    text = builtin_corpus()
    tokenizer = CharTokenizer.from_text(text)
    train_ids, val_ids = split_tokens(tokenizer.encode(text), 0.1)
    baseline = unigram_cross_entropy(train_ids, val_ids, tokenizer.vocab_size)

    model = CharLSTM(tokenizer.vocab_size, 32, args.hidden, layers=1, rng=0)
    optimizer = sadl.optim.Adam(model.parameters(), lr=1e-2)
    params = list(model.parameters())
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = sadl.data.windows(train_ids, 48, 32, rng)
        logits, _ = model(x)
        loss = sadl.ops.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        norm = float(np.sqrt(sum(float((p.grad**2).sum()) for p in params)))
        if norm > 1.0:  # clip the gradient norm at 1, as char-RNNs usually do
            for p in params:
                p.grad *= 1.0 / norm
        optimizer.step()
        if step % 20 == 0 or step == args.steps:
            print(f"step {step:5d}  train loss {loss.item():.3f}", flush=True)
    elapsed = time.perf_counter() - start

    val = evaluate(model, val_ids, 48, 8, rng)
    print(
        f"{args.steps} steps in {elapsed:.1f} s; validation {val:.3f} nats/char, "
        f"unigram baseline {baseline:.3f}"
    )
    print(repr(sample(model, tokenizer, "The ", 120, rng)))
    assert val < baseline, f"validation loss {val:.3f} does not beat the unigram {baseline:.3f}"


if __name__ == "__main__":
    main()
