"""tinygrad's beautiful_mnist on Fashion-MNIST: sadl's test accuracy against PyTorch's, and
PyTorch's against itself.

The same initial weights (PyTorch's, loaded into sadl by name) and the same batches as
bench/mnist_fashion.py (70 steps of 512, drawn with replacement), in float32. The test accuracy
(all 10,000 images, evaluation mode) is taken after each of the last ``--last`` steps, out of
any clock. A third run, PyTorch again from its initial weights times (1 + 1e-6 * N(0, 1)), is
the noise floor: the rounding of one float32 step is amplified by the steps after it, so a
single step's accuracy moves by a few hundredths between two runs of the *same* framework,
and 0.02 at step 70 cannot tell sadl from PyTorch; the mean over the last steps can. (That
the two do the same arithmetic is docs/examples/test_fashion_mnist.py's job: every step's
loss, the weights, BatchNorm's buffers and the logits agree to float64 rounding.)

Run: python bench/mnist_fashion_parity.py [--steps 70] [--last 10] [--threads 2] [--eager]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs/examples"))
from _common import set_threads

PERTURBATION = 1e-6  # relative, on every initial weight of the noise-floor run


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=70)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--last", type=int, default=10, help="average the accuracy of these steps")
    p.add_argument("--test-limit", type=int, help="test images (default: all 10,000)")
    p.add_argument("--threads", type=int, help="BLAS and torch threads (default: theirs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true", help="sadl eager (default: compiled)")
    args = p.parse_args()
    if not 1 <= args.last <= args.steps:
        p.error(f"--last must be in [1, --steps], got {args.last}")
    return args


def _sadl(state: dict[str, np.ndarray], data: Any, order: np.ndarray, args: Any) -> list[float]:
    import fashion_mnist as example
    import sadl

    x_train, y_train, x_test, y_test = data
    model = example.beautiful_mnist()
    model.load_state_dict(state)
    step = example.training_step(model, sadl.optim.Adam(model.parameters(), lr=1e-3))
    run = step if args.eager else sadl.compile(step)
    accuracies = []
    for i, idx in enumerate(order):
        run(x_train[idx], y_train[idx]).item()
        if i >= len(order) - args.last:
            accuracies.append(example.accuracy(model, x_test, y_test))
    return accuracies


def _torch(torch: Any, model: Any, data: Any, order: np.ndarray, args: Any) -> list[float]:
    x_train, y_train, x_test, y_test = (torch.from_numpy(a) for a in data)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    accuracies = []
    for i, idx in enumerate(order):
        j = torch.from_numpy(idx)
        loss = torch.nn.functional.cross_entropy(model(x_train[j]), y_train[j])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i >= len(order) - args.last:
            model.eval()
            with torch.no_grad():
                hits = sum(
                    int((model(x_test[k : k + 1000]).argmax(1) == y_test[k : k + 1000]).sum())
                    for k in range(0, len(x_test), 1000)
                )
            model.train()
            accuracies.append(hits / len(x_test))
    return accuracies


def main() -> None:
    args = _args()
    if args.threads:  # env, threadpoolctl and torch: NumPy has loaded BLAS already
        set_threads(args.threads)
    import fashion_mnist as example
    import torch

    x_train, y_train = example.images("train")
    x_test, y_test = example.images("test", args.test_limit)
    data = (x_train, y_train, x_test, y_test)
    order = np.random.default_rng(args.seed).integers(
        0, len(x_train), (args.steps, args.batch_size)
    )
    torch.manual_seed(args.seed)
    reference = example.beautiful_mnist(torch.nn)
    state = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}
    rng = np.random.default_rng(args.seed + 1)
    weights = dict(reference.named_parameters())  # BatchNorm's buffers stay as they are
    perturbed = {
        k: v * (1 + PERTURBATION * rng.standard_normal(v.shape)).astype(v.dtype)
        if k in weights
        else v
        for k, v in state.items()
    }
    twin = example.beautiful_mnist(torch.nn)
    twin.load_state_dict({k: torch.from_numpy(v) for k, v in perturbed.items()})
    sadl_name = "sadl eager" if args.eager else "sadl compiled"
    runs = {
        sadl_name: _sadl(state, data, order, args),
        "torch": _torch(torch, reference, data, order, args),
        f"torch, init x(1+{PERTURBATION:g}N)": _torch(torch, twin, data, order, args),
    }
    first = args.steps - args.last + 1
    print(
        f"{args.steps} steps of {args.batch_size}, test accuracy on {len(x_test)} images after "
        f"steps {first}..{args.steps}; load average {os.getloadavg()[0]:.1f}"
    )
    for name, accuracies in runs.items():
        print(
            f"{name:28s} step {args.steps}: {accuracies[-1]:.4f}  mean of the last "
            f"{args.last}: {np.mean(accuracies):.4f}  ({' '.join(f'{a:.3f}' for a in accuracies)})"
        )
    ours, theirs, twin_acc = (np.array(a) for a in runs.values())
    for what, a, b in (("sadl - torch", ours, theirs), ("torch - torch", twin_acc, theirs)):
        gap, mean_gap = a[-1] - b[-1], a.mean() - b.mean()
        print(f"{what:14s} step {args.steps}: {gap:+.4f}  mean of the last {args.last}: "
              f"{mean_gap:+.4f}")  # fmt: skip
    mean_gap = ours.mean() - theirs.mean()
    verdict = "within" if abs(mean_gap) <= 0.02 else "OUTSIDE"
    print(f"sadl's mean accuracy is {verdict} 0.02 of torch's ({mean_gap:+.4f})")


if __name__ == "__main__":
    from _common import where_ran

    where_ran()
    main()
