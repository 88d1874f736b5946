"""Fashion-MNIST with tinygrad's ``beautiful_mnist`` network, one compiled training step.

The network of tinygrad's ``examples/beautiful_mnist.py``: conv 5x5 32, conv 5x5 32,
BatchNorm, max-pool 2; conv 3x3 64, conv 3x3 64, BatchNorm, max-pool 2; flatten, Linear
576 -> 10 (ReLU after each convolution), Adam (lr 1e-3), batches of 512 drawn with replacement,
70 steps. Pixels are scaled to [0, 1]. The whole step (forward, loss, backward, Adam) runs under
``sadl.compile``: traced once, replayed after (BatchNorm's running statistics and its batch
counter included, and cross_entropy's class-id check tested first on every replay).

The data is Debian's ``dataset-fashion-mnist`` (``sudo apt-get install dataset-fashion-mnist``),
read by ``sadl_layers.datasets.fashion_mnist``; without it the script says so and exits with
status 77 (the docs tests report that as skipped).

The default run is short, for the tests (40 steps of 32 images, a 2,000-image test set);
``--steps 70 --batch-size 512`` is tinygrad's run and ``--epochs 5`` trains five passes over
the 60,000 images, shuffled each epoch, with Adam's rate annealed from 1e-3 to 0 on a cosine
(it must reach 0.90 test accuracy; with batches drawn with replacement and a constant rate,
585 steps reached 0.8928).

Run: python docs/examples/fashion_mnist.py [--steps 70 --batch-size 512 | --epochs 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import sadl
from sadl_layers.datasets import DatasetNotFoundError, fashion_mnist

SKIPPED = 77  # the exit status of a run without its data (test_examples.py: a skip)


def beautiful_mnist(nn: Any = sadl.nn) -> Any:
    """tinygrad's network, layer for layer, built from ``nn``: ``sadl.nn`` by default, or
    ``torch.nn`` for its PyTorch twin (this script itself needs only sadl). Both have the same
    layers in the same order, so that a state dict maps one onto the other by name.
    """
    return nn.Sequential(
        nn.Conv2d(1, 32, 5), nn.ReLU(),
        nn.Conv2d(32, 32, 5), nn.ReLU(),
        nn.BatchNorm2d(32), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.Conv2d(64, 64, 3), nn.ReLU(),
        nn.BatchNorm2d(64), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(576, 10),
    )  # fmt: skip


def training_step(
    model: sadl.nn.Sequential, optimizer: sadl.optim.Optimizer
) -> Callable[[np.ndarray, np.ndarray], sadl.Tensor]:
    """One step: forward, cross-entropy, backward, Adam; returns the loss (a Tensor)."""

    def step(x: np.ndarray, y: np.ndarray) -> sadl.Tensor:
        loss = sadl.ops.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def images(split: str, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(N, 1, 28, 28) float32 pixels in [0, 1] and int64 labels."""
    x, y = fashion_mnist(split)
    x, y = (x, y) if limit is None else (x[:limit], y[:limit])
    return (x[:, None] / np.float32(255)).astype(np.float32), y


def accuracy(model: sadl.nn.Sequential, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy in evaluation mode (BatchNorm's running statistics)."""
    model.eval()
    with sadl.no_grad():
        hits = sum(
            int((model(sadl.tensor(x[i : i + 1000])).numpy().argmax(1) == y[i : i + 1000]).sum())
            for i in range(0, len(x), 1000)
        )
    model.train()
    return hits / len(x)


def train(args: argparse.Namespace) -> tuple[float, float, list[float]]:
    """Train as asked; returns (test accuracy, training seconds, the losses)."""
    x_train, y_train = images("train")
    x_test, y_test = images("test", args.test_limit)
    sadl.manual_seed(args.seed)
    model = beautiful_mnist()
    optimizer = sadl.optim.Adam(model.parameters(), lr=1e-3)
    step = training_step(model, optimizer)
    run = sadl.compile(step) if args.compile else step
    rng = np.random.default_rng(args.seed)
    if args.epochs:  # epochs: every image once per epoch, the rate annealed to 0 (cosine)
        per_epoch = len(x_train) // args.batch_size  # whole batches: one shape to replay
        whole = per_epoch * args.batch_size
        order = [rng.permutation(len(x_train))[:whole] for _ in range(args.epochs)]
        batches = list(np.concatenate(order).reshape(-1, args.batch_size))
        schedule = sadl.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(batches))
    else:  # tinygrad's run: batches drawn with replacement, a constant rate
        batches = [rng.integers(0, len(x_train), args.batch_size) for _ in range(args.steps)]
        schedule = None
    steps = len(batches)
    losses = []
    start = time.perf_counter()
    for i, idx in enumerate(batches):
        losses.append(float(run(x_train[idx], y_train[idx]).item()))
        if schedule is not None:
            schedule.step()
        if (i + 1) % max(1, steps // 10) == 0:
            print(f"step {i + 1}/{steps}: loss {losses[-1]:.3f}", flush=True)
    seconds = time.perf_counter() - start
    if args.compile:
        stats = run.stats
        assert stats.traces == 1 and stats.fallbacks == 0, stats
        print(f"compiled: traced once, replayed {stats.replays} times")
    return accuracy(model, x_test, y_test), seconds, losses


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=0, help="passes over the training set")
    p.add_argument("--test-limit", type=int, default=None, help="default: 2,000 for short runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", dest="compile", action="store_false")
    args = p.parse_args(argv)
    if args.test_limit is None and not args.epochs and args.steps < 70:  # a short run
        args.test_limit = 2000
    try:
        acc, seconds, losses = train(args)
    except DatasetNotFoundError as exc:
        print(f"skipped: {exc}")
        raise SystemExit(SKIPPED) from None
    print(f"test accuracy {acc:.4f} after {len(losses)} steps ({seconds:.1f} s of training)")
    assert np.mean(losses[-3:]) < losses[0], "the loss did not fall"
    # Five epochs must reach 0.90 (the Fashion-MNIST README lists 0.916 for two convolutions);
    # the short default run is only a smoke test. tinygrad's 70 steps are compared with
    # PyTorch from the same weights and batches by bench/mnist_fashion.py. The 40 steps of 32
    # amplify float32 rounding: eager, compiled and compiled with kernels (each within its
    # tolerance, bit-identical at kernels off) and the BLAS thread count moved it over 0.50-0.64,
    # so the smoke test's floor is 0.40 (chance is 0.10).
    floor = 0.90 if args.epochs >= 5 else 0.40 if len(losses) <= 40 else 0.0
    assert acc >= floor, f"test accuracy {acc:.4f} < {floor}"


if __name__ == "__main__":
    main()
