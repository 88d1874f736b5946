"""Classify a 3-arm spiral with a 2-layer MLP: the smallest complete sadl training loop.

The classic CS231n toy problem: 3 interleaved spiral arms of 100 points each, not linearly
separable. A 2-layer MLP (100 hidden ReLU units) trained full-batch with Adam separates them;
training stops as soon as the accuracy reaches 0.97, and must do so within one second.

Run: python docs/examples/spiral.py
"""

from __future__ import annotations

import time

import numpy as np
import sadl

TARGET = 0.97
TIME_BUDGET_S = 1.0


def spiral(points_per_arm: int = 100, arms: int = 3, noise: float = 0.2, seed: int = 0):
    """(x, y): 2-D points on ``arms`` spiral arms and the arm index of each."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for arm in range(arms):
        r = np.linspace(0.0, 1.0, points_per_arm)
        theta = np.linspace(arm * 4.0, (arm + 1) * 4.0, points_per_arm)
        theta = theta + rng.normal(0.0, noise, points_per_arm)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ys.append(np.full(points_per_arm, arm))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


def main() -> float:
    sadl.manual_seed(0)
    x, y = spiral()
    model = sadl.nn.Sequential(sadl.nn.Linear(2, 100), sadl.nn.ReLU(), sadl.nn.Linear(100, 3))
    optimizer = sadl.optim.Adam(model.parameters(), lr=0.02)
    inputs = sadl.tensor(x)

    start = time.perf_counter()
    accuracy, step = 0.0, 0
    while accuracy < TARGET and time.perf_counter() - start < TIME_BUDGET_S:
        logits = model(inputs)
        loss = sadl.ops.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        accuracy = float((logits.data.argmax(axis=1) == y).mean())
    elapsed = time.perf_counter() - start

    print(f"{step} steps in {elapsed:.2f} s: loss {loss.item():.3f}, accuracy {accuracy:.3f}")
    assert accuracy >= TARGET, f"accuracy {accuracy:.3f} < {TARGET} after {elapsed:.2f} s"
    return accuracy


if __name__ == "__main__":
    main()
