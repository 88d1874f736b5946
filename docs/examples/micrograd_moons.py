"""micrograd's demo, exactly: the same moons, network, loss and SGD, matched step by step.

karpathy/micrograd's ``demo.ipynb`` trains an MLP 2 -> 16 -> 16 -> 1 (ReLU, a linear output) on
scikit-learn's two moons (100 points, noise 0.1) with a max-margin loss, an L2 penalty of 1e-4
and SGD whose learning rate falls from 1.0 to 0.109 over 100 steps. micrograd works one scalar
``Value`` at a time in Python floats; here the same computation is three ``sadl.nn.Linear``
layers in float64. The weights are micrograd's: ``random.uniform(-1, 1)`` drawn in its order,
biases 0, after the demo's ``random.seed(1337)`` and ``np.random.seed(1337)``.

The loss and accuracy of every step must equal micrograd 0.1.0's to 1e-12. The first and last
losses are always compared with what the demo's notebook prints; where micrograd is installed
(``pip install micrograd==0.1.0``) it is run too, for the first 2 steps by default (it takes
about a second a step in pure Python) and for all 100 with ``--micrograd-steps 100``.

Run: python docs/examples/micrograd_moons.py [--micrograd-steps 100]
"""

from __future__ import annotations

import argparse
import itertools
import random

import numpy as np
import sadl

STEPS = 100
ALPHA = 1e-4  # the L2 penalty of the demo's loss
SIZES = (2, 16, 16, 1)
#: What demo.ipynb prints for step 0 and step 99 (loss; accuracy 50% and 100%).
PUBLISHED = {0: (0.8958441028683222, 0.5), 99: (0.010978370135492717, 1.0)}
TOLERANCE = 1e-12


def moons() -> tuple[np.ndarray, np.ndarray]:
    """The demo's data: make_moons(100, noise=0.1) after its seeds, labels as -1 / +1."""
    from sklearn.datasets import make_moons

    np.random.seed(1337)  # make_moons draws from NumPy's global generator, as in the demo
    random.seed(1337)  # micrograd's weights come from Python's
    x, y = make_moons(n_samples=100, noise=0.1)
    return x, (y * 2 - 1).astype(np.float64)


def micrograd_weights() -> list[np.ndarray]:
    """Each layer's (out, in) weights as micrograd's MLP draws them from ``random``."""
    return [
        np.array([[random.uniform(-1, 1) for _ in range(n_in)] for _ in range(n_out)])
        for n_in, n_out in itertools.pairwise(SIZES)
    ]


def train_sadl() -> list[tuple[float, float]]:
    """(loss, accuracy) of each of the 100 steps, trained with sadl."""
    x, y = moons()
    layers = []
    for weight in micrograd_weights():
        layer = sadl.nn.Linear(weight.shape[1], weight.shape[0], dtype=np.float64)
        layer.load_state_dict({"weight": weight, "bias": np.zeros(weight.shape[0])})
        layers.append(layer)
    params = [p for layer in layers for p in layer.parameters()]
    optimizer = sadl.optim.SGD(params, lr=1.0)
    inputs, targets = sadl.tensor(x), sadl.tensor(y)
    history = []
    for k in range(STEPS):
        h = inputs
        for i, layer in enumerate(layers):
            h = layer(h)
            h = h.relu() if i < len(layers) - 1 else h
        scores = h.reshape(-1)
        data_loss = (1 - targets * scores).relu().mean()  # the "max-margin" (hinge) loss
        total = data_loss + ALPHA * sum((p * p).sum() for p in params)
        accuracy = float(((y > 0) == (scores.data > 0)).mean())
        optimizer.zero_grad()
        total.backward()
        optimizer.param_groups[0]["lr"] = 1.0 - 0.9 * k / 100
        optimizer.step()
        history.append((total.item(), accuracy))
    return history


def train_micrograd(steps: int = STEPS) -> list[tuple[float, float]]:
    """The first ``steps`` of the demo's own loop on micrograd 0.1.0 (ImportError without it)."""
    from micrograd.engine import Value
    from micrograd.nn import MLP

    x, y = moons()
    model = MLP(2, list(SIZES[1:]))
    history = []
    for k in range(steps):
        scores = [model(list(map(Value, row))) for row in x]
        losses = [(1 + -yi * si).relu() for yi, si in zip(y, scores, strict=True)]
        data_loss = sum(losses) * (1.0 / len(losses))
        total = data_loss + ALPHA * sum(p * p for p in model.parameters())
        hits = [(yi > 0) == (si.data > 0) for yi, si in zip(y, scores, strict=True)]
        model.zero_grad()
        total.backward()
        for p in model.parameters():
            p.data -= (1.0 - 0.9 * k / 100) * p.grad
        history.append((total.data, sum(hits) / len(hits)))
    return history


def compare(ours: list[tuple[float, float]], micrograd_steps: int) -> str:
    """Assert ``ours`` equals the published losses and micrograd's first steps; say what ran."""
    for k, (loss, accuracy) in PUBLISHED.items():
        assert abs(ours[k][0] - loss) <= TOLERANCE, f"step {k}: loss {ours[k][0]!r} != {loss!r}"
        assert ours[k][1] == accuracy, f"step {k}: accuracy {ours[k][1]} != {accuracy}"
    against = "demo.ipynb's published losses of steps 0 and 99"
    try:
        theirs = train_micrograd(micrograd_steps)
    except ImportError:
        return against + " (micrograd is not installed)"
    for k, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        assert abs(a[0] - b[0]) <= TOLERANCE, f"step {k}: loss {a[0]!r}, micrograd {b[0]!r}"
        assert a[1] == b[1], f"step {k}: accuracy {a[1]}, micrograd {b[1]}"
    worst = max(abs(a[0] - b[0]) for a, b in zip(ours, theirs, strict=False))
    return f"{against} and micrograd 0.1.0's first {len(theirs)} steps (within {worst:.1g})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micrograd-steps", type=int, default=2, choices=range(STEPS + 1))
    args = parser.parse_args(argv)
    ours = train_sadl()
    for k in (0, 1, 2, 50, 99):
        print(f"step {k} loss {ours[k][0]:.16f}, accuracy {ours[k][1] * 100:.1f}%")
    print("matches " + compare(ours, args.micrograd_steps))


if __name__ == "__main__":
    main()
