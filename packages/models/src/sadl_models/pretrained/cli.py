"""``sadl generate --pretrained PATH``: stream a published checkpoint's continuation.

Tokens are printed as they come (the text is decoded from all ids so far, so a character split
over several byte-level tokens appears once it is whole); the end reports the number of new
tokens, the time to the first one and tokens per second on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["generate_pretrained"]


def generate_pretrained(args: argparse.Namespace) -> int:
    """Run ``sadl generate --pretrained``; errors are one line on stderr and status 2."""
    from sadl_serialize import SadlFormatError

    from sadl_models.pretrained.loading import PretrainedLoadError, load_pretrained
    from sadl_models.pretrained.tokenizer import TokenizerLoadError

    prog = "sadl generate"
    try:
        model, tokenizer = load_pretrained(args.pretrained)
        if not hasattr(model, "generate"):
            raise PretrainedLoadError(f"{args.pretrained}: an encoder; it does not generate text")
        prompt = "Once upon a time" if args.prompt is None else args.prompt
        if args.chat:
            prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
        ids = tokenizer.encode(prompt)
        if not ids:
            raise PretrainedLoadError("--prompt is empty: give at least one character")
    except (PretrainedLoadError, TokenizerLoadError, SadlFormatError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except OSError as exc:
        print(f"{prog}: error: {exc.filename or args.pretrained}: {exc.strerror or exc}",
              file=sys.stderr, flush=True)  # fmt: skip
        return 2
    temperature = 0.0 if args.temperature is None else args.temperature
    eos = tokenizer.eos_token_id
    stream = _Stream(tokenizer, len(ids), ids)
    if not args.chat:
        sys.stdout.write(prompt)
    start = time.perf_counter()
    out = model.generate(
        ids, args.tokens, temperature=temperature, top_k=args.top_k, top_p=args.top_p,
        rng=args.seed, stop_ids=() if eos is None else (eos,), on_token=stream,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    stream.finish()
    new = len(out) - len(ids)
    first = (stream.first - start) if stream.first is not None else 0.0
    print(f"\n[{new} tokens in {elapsed:.2f} s: {new / max(elapsed, 1e-9):.1f} tokens/s, first "
          f"token after {first:.2f} s]", file=sys.stderr, flush=True)  # fmt: skip
    return 0


class _Stream:
    """Prints the text of the new tokens as they arrive."""

    def __init__(self, tokenizer: Any, prompt_len: int, prompt: list[int]) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.shown = ""
        self.first: float | None = None

    def __call__(self, step: Any) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.ids.append(int(step[0]))
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):  # a character still incomplete: wait for its next byte
            return
        sys.stdout.write(text[len(self.shown) :])
        sys.stdout.flush()
        self.shown = text

    def finish(self) -> None:
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        sys.stdout.write(text[len(self.shown) :])
        sys.stdout.flush()
