"""Recognize handwritten digits with a small convolutional network.

Uses scikit-learn's bundled 8x8 digits (1,797 images, no download; scikit-learn is an optional
dependency of this example only). Two Conv2d + ReLU + MaxPool2d stages and a Linear classifier,
trained with Adam on minibatches; prints the held-out test accuracy and checks a floor.

Run: python docs/examples/digits.py
"""

from __future__ import annotations

import sys
import time

import numpy as np
import sadl

FLOOR = 0.95


def load_digits_or_exit():
    """(images (n, 1, 8, 8) float32 in [0, 1], labels int64), or exit if scikit-learn is missing."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("digits.py needs scikit-learn for its bundled dataset: pip install scikit-learn")
        raise SystemExit(0) from None
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    return images, digits.target.astype(np.int64)


def main() -> float:
    sadl.manual_seed(0)
    rng = np.random.default_rng(0)
    images, labels = load_digits_or_exit()
    (x_train, y_train), (x_test, y_test) = sadl.data.train_val_split(
        images, labels, val_fraction=0.2, rng=rng
    )
    nn = sadl.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),  # 16 x 8 x 8
        nn.ReLU(),
        nn.MaxPool2d(2),  # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1),  # 32 x 4 x 4
        nn.ReLU(),
        nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 10),
    )
    optimizer = sadl.optim.Adam(model.parameters(), lr=2e-3)

    start = time.perf_counter()
    for epoch in range(10):
        model.train()
        for xb, yb in sadl.data.batches(x_train, y_train, batch_size=64, shuffle=True, rng=rng):
            loss = sadl.ops.cross_entropy(model(sadl.tensor(xb)), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with sadl.no_grad():
            predicted = model(sadl.tensor(x_test)).data.argmax(axis=1)
        accuracy = float((predicted == y_test).mean())
        print(f"epoch {epoch + 1}: last batch loss {loss.item():.3f}, test accuracy {accuracy:.3f}")
    print(f"trained in {time.perf_counter() - start:.1f} s on {len(x_train)} images")
    assert accuracy >= FLOOR, f"test accuracy {accuracy:.3f} is below {FLOOR}"
    return accuracy


if __name__ == "__main__":
    sys.exit(0 if main() >= FLOOR else 1)
