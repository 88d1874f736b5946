"""Draw docs/img/mlp-graph.svg: the autograd graph of one MLP loss, by sadl.viz.

Usage: python docs/img/make_graph.py [--check]
Writes mlp-graph.dot and, with Graphviz's ``dot`` installed, mlp-graph.svg. With ``--check`` it
writes nothing and fails when mlp-graph.dot is not what sadl.viz draws today (the docs tests run
this, so the picture cannot drift from the code).
"""

import sys
from pathlib import Path

import numpy as np
import sadl

HERE = Path(__file__).resolve().parent


def loss_and_names():
    sadl.manual_seed(0)
    model = sadl.nn.Sequential(sadl.nn.Linear(3, 4), sadl.nn.Tanh(), sadl.nn.Linear(4, 1))
    x = sadl.tensor(np.ones((8, 3), np.float32))
    y = sadl.tensor(np.zeros((8, 1), np.float32))
    loss = ((model(x) - y) ** 2).mean()
    return loss, dict(model.named_parameters())


def main(argv: list[str]) -> int:
    loss, names = loss_and_names()
    dot = sadl.viz.to_dot(loss, names=names)
    target = HERE / "mlp-graph.dot"
    if "--check" in argv:
        if target.read_text() != dot:
            print(f"{target} is out of date: run python docs/img/make_graph.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(dot)
    sadl.viz.render(loss, HERE / "mlp-graph.svg", names=names)
    print(f"wrote {target} and {HERE / 'mlp-graph.svg'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
