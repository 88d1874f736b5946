"""nanoGPT's Shakespeare on a CPU, end to end: ``sadl train gpt`` against nanoGPT's own code.

Three whole runs, each in a fresh process timed from start to exit, on char-rnn's tiny
Shakespeare with nanoGPT's CPU settings (its README: ``config/train_shakespeare_char.py``
with ``--device=cpu --compile=False --eval_iters=20 --block_size=64 --batch_size=12 --n_layer=4
--n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0``):

* ``sadl-compiled``: ``sadl train gpt --config docs/examples/shakespeare_char.toml --compile``
  (sadl.compile with sadl-kernels' fused kernels where installed);
* ``sadl-eager``: the same without ``--compile``;
* ``torch``: nanoGPT's ``model.py`` (imported from a nanoGPT checkout, ``--nanogpt DIR``) with
  the loop of its ``train.py``, reproduced below line for line (get_batch, get_lr,
  estimate_loss, clip_grad_norm_, a checkpoint when the val loss improves) on the local torch.

Writes into ``--out`` (default ``runs/shakespeare``): each run's folder, ``summary.json``
(wall seconds, best val loss, the ratios) and ``curves.png`` (the train and val losses of every
run in one plot; docs/examples/shakespeare.md shows it). The whole thing takes minutes on a
quiet machine; ``--max-iters 20`` is a smoke test of the harness, not a measurement.

Run: python bench/shakespeare.py --text input.txt --nanogpt ~/src/nanoGPT [--threads 1]
     python bench/shakespeare.py --text input.txt --profile-steps 200   (where the time goes)
     python bench/shakespeare.py --text input.txt --nanogpt nanoGPT/.git --max-iters 20   (smoke)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PRESET = ROOT / "docs/examples/shakespeare_char.toml"
DEFAULT_TEXT = ROOT.parent / "shared/data/tinyshakespeare.txt"
RUNS = ("sadl-compiled", "sadl-eager", "torch")
#: What ``--publish`` copies into docs/examples/ (shakespeare.md shows them).
PUBLISHED = {
    name: ROOT / "docs/examples" / f"shakespeare_{name}"
    for name in ("curves.png", "sample.txt", "summary.json")
}
FETCH = "curl -o input.txt https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="char-rnn's input.txt")
    p.add_argument(
        "--nanogpt",
        type=Path,
        help="a nanoGPT checkout or git directory (a bare clone too): its model.py is imported",
    )
    p.add_argument("--out", type=Path, default=ROOT / "runs/shakespeare")
    p.add_argument(
        "--max-iters",
        "--steps",
        dest="steps",
        type=int,
        default=2000,
        help="nanoGPT's max_iters (2000: the real run; fewer: a smoke test of the harness)",
    )
    p.add_argument("--runs", default=",".join(RUNS), help=f"a subset of {','.join(RUNS)}")
    p.add_argument("--threads", type=int, help="BLAS / torch threads (default: each decides)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument(
        "--publish",
        action="store_true",
        help="also copy curves.png, sample.txt and summary.json into docs/examples/ "
        "(shakespeare_*: the page's figure, sample and numbers)",
    )
    p.add_argument(
        "--profile-steps",
        type=int,
        metavar="N",
        help="instead: N steps of each sadl run under cProfile, the top functions written to "
        "OUT/<run>/profile.txt (where the time goes; not a timing)",
    )
    p.add_argument("--torch-worker", type=Path, help=argparse.SUPPRESS)
    return p.parse_args()


def _env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
    return env


def _profile(args: argparse.Namespace, compiled: bool, out: Path) -> None:
    """``args.profile_steps`` steps of the sadl run under cProfile; the top 40 by own time."""
    import pstats

    prof = out / "profile.prof"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "sadl", "train", "gpt"]
    cmd += ["--config", str(PRESET), "--text", str(args.text), "--out", str(out / "run")]
    cmd += ["--overwrite", "--no-progress", "--steps", str(args.profile_steps)]
    cmd += ["--warmup-steps", "0", "--eval-interval", str(args.profile_steps)]
    cmd += ["--compile"] if compiled else []
    subprocess.run(cmd, check=True, capture_output=True, env=_env(args.threads))
    with (out / "profile.txt").open("w") as f:
        pstats.Stats(str(prof), stream=f).sort_stats("tottime").print_stats(40)
    print(f"wrote {out / 'profile.txt'}")


def _sadl_run(args: argparse.Namespace, compiled: bool, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "sadl", "train", "gpt", "--config", str(PRESET)]
    cmd += ["--text", str(args.text), "--out", str(out), "--overwrite", "--no-progress"]
    cmd += ["--steps", str(args.steps), "--seed", str(args.seed)]
    if args.steps < 2000:  # a smoke test: keep warmup < steps and evaluate a few times
        cmd += ["--warmup-steps", str(min(100, args.steps // 10)), "--eval-interval"]
        cmd += [str(max(1, args.steps // 4))]
    cmd += ["--compile"] if compiled else []
    cmd += ["--threads", str(args.threads)] if args.threads else []
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(args.threads))
    wall = time.perf_counter() - start
    (out / "stdout.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [(r["step"], r["val_loss"]) for r in records if "val_loss" in r]
    sample = proc.stdout.split("sample:", 1)[-1].strip() if "sample:" in proc.stdout else ""
    return {
        "wall_s": wall,
        "train": [r["loss"] for r in records],
        "evals": evals,
        "best_val": min(v for _, v in evals),
        "sample": sample,
    }


def nanogpt_model(source: Path | None, out: Path) -> Path:
    """The folder holding nanoGPT's ``model.py``: ``source`` itself when it is a checkout, or
    ``out/nanogpt`` with ``model.py`` written from ``source``'s HEAD when it is a git directory
    (a bare clone or a ``.git`` folder, as ``git clone --bare`` or a mirror leaves it).
    """
    hint = "git clone https://github.com/karpathy/nanoGPT, or leave torch out of --runs"
    if source is None:
        raise SystemExit(f"--nanogpt DIR: a nanoGPT checkout is needed for the torch run ({hint})")
    if (source / "model.py").is_file():
        return source
    if not (source / "HEAD").is_file() or not (source / "objects").is_dir():
        raise SystemExit(
            f"--nanogpt {source}: neither a checkout with model.py nor a git directory ({hint})"
        )
    proc = subprocess.run(
        ["git", "--git-dir", str(source), "show", "HEAD:model.py"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"--nanogpt {source}: git could not read model.py at HEAD: {proc.stderr.strip()}"
        )
    folder = out / "nanogpt"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "model.py.tmp"
    tmp.write_text(proc.stdout)
    os.replace(tmp, folder / "model.py")
    return folder


def _torch_run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    args.nanogpt = nanogpt_model(args.nanogpt, out)
    spec = out / "spec.json"
    spec.write_text(
        json.dumps({**vars(args), "text": str(args.text), "out": str(out)}, default=str)
    )
    start = time.perf_counter()
    cmd = [sys.executable, __file__, "--torch-worker", str(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(args.threads))
    wall = time.perf_counter() - start
    (out / "stdout.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"the torch run failed:\n{proc.stderr}")
    result = json.loads((out / "result.json").read_text())
    return {**result, "wall_s": wall, "best_val": min(v for _, v in result["evals"])}


def _torch_worker(spec_path: Path) -> None:
    """nanoGPT's train.py loop with its CPU settings (the names below are train.py's)."""
    import numpy as np
    import torch

    spec = json.loads(spec_path.read_text())
    sys.path.insert(0, spec["nanogpt"])
    from model import GPT, GPTConfig  # nanoGPT's model.py

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    out_dir = Path(spec["out"])
    data = Path(spec["text"]).read_text(encoding="utf-8")
    chars = sorted(set(data))  # data/shakespeare_char/prepare.py
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = np.array([stoi[c] for c in data], dtype=np.uint16)
    n = len(ids)
    splits = {"train": ids[: int(n * 0.9)], "val": ids[int(n * 0.9) :]}
    max_iters = lr_decay_iters = spec["steps"]
    eval_interval, eval_iters = (250, 20) if max_iters >= 2000 else (max(1, max_iters // 4), 20)
    batch_size, block_size = 12, 64
    learning_rate, min_lr, warmup_iters = 1e-3, 1e-4, min(100, max_iters // 10)
    weight_decay, beta1, beta2, grad_clip = 1e-1, 0.9, 0.99, 1.0
    torch.manual_seed(spec["seed"])
    cfg = GPTConfig(
        n_layer=4, n_head=4, n_embd=128, block_size=block_size, bias=False,
        vocab_size=len(chars), dropout=0.0,
    )  # fmt: skip
    model = GPT(cfg)
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), "cpu")

    def get_batch(split: str) -> tuple[Any, Any]:
        d = splits[split]
        ix = torch.randint(len(d) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy(d[i : i + block_size].astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy(d[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
        )
        return x, y

    @torch.no_grad()
    def estimate_loss() -> dict[str, float]:
        result = {}
        model.eval()
        for split in ("train", "val"):
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                x, y = get_batch(split)
                _, loss = model(x, y)
                losses[k] = loss.item()
            result[split] = float(losses.mean())
        model.train()
        return result

    def get_lr(it: int) -> float:
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

    train_losses, evals, best_val = [], [], 1e9
    x, y = get_batch("train")
    iter_num = 0
    while True:
        for group in optimizer.param_groups:
            group["lr"] = get_lr(iter_num)
        if iter_num % eval_interval == 0:
            losses = estimate_loss()
            evals.append((iter_num, losses["val"]))
            if losses["val"] < best_val:
                best_val = losses["val"]
                if iter_num > 0:
                    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
                    torch.save(checkpoint, out_dir / "ckpt.pt")
        _, loss = model(x, y)
        x, y = get_batch("train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        train_losses.append(loss.item())  # log_interval = 1
        iter_num += 1
        if iter_num > max_iters:
            break
    (out_dir / "result.json").write_text(json.dumps({"train": train_losses, "evals": evals}))


def _plot(results: dict[str, dict[str, Any]], path: Path, steps: int, load: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, r in results.items():
        (line,) = ax.plot(range(1, len(r["train"]) + 1), r["train"], alpha=0.35, lw=0.8)
        steps, vals = zip(*r["evals"], strict=True)
        ax.plot(
            steps,
            vals,
            "o-",
            color=line.get_color(),
            label=f"{name} val (best {r['best_val']:.3f})",
        )
    title = f"tiny Shakespeare, nanoGPT's CPU settings: {steps} iterations (load {load:.1f})"
    ax.set(xlabel="step", ylabel="loss (nats/char)", title=title)
    ax.set_ylim(top=4.5)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def main() -> None:
    args = _args()
    if args.torch_worker is not None:
        _torch_worker(args.torch_worker)
        return
    if not args.text.is_file():
        raise SystemExit(f"--text {args.text}: no such file; fetch it once: {FETCH}")
    runs = [r for r in args.runs.split(",") if r]
    unknown = sorted(set(runs) - set(RUNS))
    if unknown:
        raise SystemExit(f"--runs: unknown {unknown}; choose from {', '.join(RUNS)}")
    if args.profile_steps:
        for name in (r for r in runs if r != "torch"):
            (args.out / name).mkdir(parents=True, exist_ok=True)
            _profile(args, name == "sadl-compiled", args.out / name)
        return
    results: dict[str, dict[str, Any]] = {}
    for name in runs:
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        print(f"{name}: running ...", flush=True)
        if name == "torch":
            results[name] = _torch_run(args, out)
        else:
            results[name] = _sadl_run(args, name == "sadl-compiled", out)
        r = results[name]
        print(f"{name}: {r['wall_s']:.1f} s, best val loss {r['best_val']:.4f}", flush=True)
    summary: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "steps": args.steps,
        "threads": args.threads,
        "load_average": os.getloadavg(),
        "runs": {k: {"wall_s": v["wall_s"], "best_val": v["best_val"]} for k, v in results.items()},
    }
    if "torch" in results:
        for name in ("sadl-compiled", "sadl-eager"):
            if name in results:
                ratio = results[name]["wall_s"] / results["torch"]["wall_s"]
                summary["runs"][name]["time_vs_torch"] = ratio
                print(f"{name} / torch wall time: {ratio:.2f}x")
    sample = next((r["sample"] for r in results.values() if r.get("sample")), "")
    (args.out / "sample.txt").write_text(sample + "\n")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    _plot(results, args.out / "curves.png", args.steps, summary["load_average"][0])
    if args.publish:  # the docs page's figure, sample and numbers
        for name, target in PUBLISHED.items():
            tmp = target.with_suffix(target.suffix + ".tmp")
            tmp.write_bytes((args.out / name).read_bytes())
            os.replace(tmp, target)
        print(f"published into {PUBLISHED['curves.png'].parent}")
    print(
        f"wrote {args.out / 'summary.json'}, {args.out / 'curves.png'}, {args.out / 'sample.txt'}"
    )


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
