"""tinygrad's beautiful_mnist network on Fashion-MNIST: sadl (compiled, eager) against PyTorch.

The same initial weights (PyTorch's initialization, loaded into sadl by name) and the same
batches (indices drawn once, with replacement, as tinygrad draws them), 70 steps of 512 with
Adam at 1e-3, then the test accuracy on all 10,000 test images. Prints the training seconds of
each and the ratios, writes ``--json`` if given. Needs Debian's ``dataset-fashion-mnist``.
sadl's compiled training includes tracing its step (the first of the 70); the process's one-time
costs (imports on first use, numba loading a cached kernel) are paid by a warm-up before,
as torch's import is paid before its clock starts. One run's accuracy at step 70 moves by a few
hundredths between two runs of PyTorch itself: bench/mnist_fashion_parity.py compares the mean
over the last steps, with PyTorch against itself as the noise floor.

Run: python bench/mnist_fashion.py [--steps 70] [--threads 2] [--json runs/fashion.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs/examples"))
from _common import set_threads


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=70)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--threads", type=int, help="BLAS and torch threads (default: theirs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="write the results here too")
    return p.parse_args()


def _sadl(state: dict[str, np.ndarray], data: Any, order: np.ndarray, compiled: bool) -> dict:
    import fashion_mnist as example  # docs/examples/fashion_mnist.py: the same network
    import sadl

    x_train, y_train, x_test, y_test = data
    model = example.beautiful_mnist()
    model.load_state_dict(state)
    optimizer = sadl.optim.Adam(model.parameters(), lr=1e-3)

    def step(x: Any, y: Any) -> Any:
        loss = sadl.ops.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    run = sadl.compile(step) if compiled else step
    start = time.perf_counter()
    losses = [float(run(x_train[order[0]], y_train[order[0]]).item())]
    first = time.perf_counter() - start  # compiled: the trace of this step, at this batch size
    losses += [float(run(x_train[idx], y_train[idx]).item()) for idx in order[1:]]
    seconds = time.perf_counter() - start
    accuracy = example.accuracy(model, x_test, y_test)
    result = {"seconds": seconds, "first_step_s": first, "accuracy": accuracy}
    return result | {"first_loss": losses[0], "loss": losses[-1]}


def _warm_up(data: Any) -> None:
    """Two compiled steps of a throwaway model on 8 images: the process's one-time costs
    (imports done on first use, numba loading sadl-kernels' cached Adam kernel) are then not
    counted as training, as torch's own import is not. The 70 steps still trace their step.
    """
    import fashion_mnist as example
    import sadl

    model = example.beautiful_mnist()
    optimizer = sadl.optim.Adam(model.parameters(), lr=1e-3)

    def step(x: Any, y: Any) -> Any:
        loss = sadl.ops.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    run = sadl.compile(step)
    for _ in range(2):
        run(data[0][:8], data[1][:8]).item()


def _torch(torch: Any, model: Any, data: Any, order: np.ndarray) -> dict:
    x_train, y_train, x_test, y_test = (torch.from_numpy(a) for a in data)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    losses = []
    first = 0.0
    for idx in order:
        i = torch.from_numpy(idx)
        loss = torch.nn.functional.cross_entropy(model(x_train[i]), y_train[i])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        first = first or time.perf_counter() - start
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        hits = sum(
            int((model(x_test[i : i + 1000]).argmax(1) == y_test[i : i + 1000]).sum())
            for i in range(0, len(x_test), 1000)
        )
    accuracy = hits / len(x_test)
    result = {"seconds": seconds, "first_step_s": first, "accuracy": accuracy}
    return result | {"first_loss": losses[0], "loss": losses[-1]}


def main() -> None:
    args = _args()
    if args.threads:  # env, threadpoolctl and torch: NumPy has loaded BLAS already
        set_threads(args.threads)
    import fashion_mnist as example
    import torch

    x_train, y_train = example.images("train")
    x_test, y_test = example.images("test")
    data = (x_train, y_train, x_test, y_test)
    rng = np.random.default_rng(args.seed)
    order = rng.integers(0, len(x_train), (args.steps, args.batch_size))
    torch.manual_seed(args.seed)
    reference = example.beautiful_mnist(torch.nn)
    state = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}
    _warm_up(data)
    results = {
        "sadl compiled": _sadl(state, data, order, compiled=True),
        "sadl eager": _sadl(state, data, order, compiled=False),
        "torch": _torch(torch, reference, data, order),
    }
    print(f"{args.steps} steps of {args.batch_size}, load average {os.getloadavg()[0]:.1f}")
    for name, r in results.items():
        ratio = r["seconds"] / results["torch"]["seconds"]
        print(
            f"{name:14s} {r['seconds']:7.1f} s ({ratio:.2f}x torch; first step "
            f"{r['first_step_s']:.1f} s)  loss {r['first_loss']:.3f} "
            f"-> {r['loss']:.3f}  test accuracy {r['accuracy']:.4f}"
        )
    for name in ("sadl compiled", "sadl eager"):
        gap = results[name]["accuracy"] - results["torch"]["accuracy"]
        ratio = results[name]["seconds"] / results["torch"]["seconds"]
        verdict = "within" if abs(gap) <= 0.02 and ratio <= 1.5 else "OUTSIDE"
        print(f"{name}: accuracy {gap:+.4f} vs torch, {ratio:.2f}x its time ({verdict} 0.02, 1.5x)")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, **results}))


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
