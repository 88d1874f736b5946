import json

import numpy as np
import sadl
from sadl.plugins import (
    Example,
    FormatDef,
    LayerDef,
    ModelDef,
    OpDef,
    OptimizerDef,
    hookimpl,
    require_api,
)

require_api("1.0")


class Doubler(sadl.nn.Module):
    def forward(self, x):
        return x * 2


class Noop(sadl.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    def update(self, param, grad, state, group):
        pass


CUBE = OpDef(
    "fake_cube",
    lambda x: x**3,
    (lambda g, out, x: 3 * g * x * x,),
    examples=(Example((3,)),),
)


@hookimpl
def register_ops():
    return [CUBE]


@hookimpl
def register_layers():
    return [LayerDef("Doubler", Doubler)]


@hookimpl
def register_optimizers():
    return [OptimizerDef("Noop", Noop)]


@hookimpl
def register_commands(subparsers):
    p = subparsers.add_parser("fake-hello", help="say hello")
    p.set_defaults(func=lambda args: print("hello from fake") or 0)


def make_doubler(scale=2):
    layer = Doubler()
    layer.scale = scale
    return layer


@hookimpl
def register_models():
    return [ModelDef("doubler", make_doubler, {"scale": 2})]


def save_json(obj, path):
    data = (
        obj.numpy().tolist()
        if hasattr(obj, "numpy")
        else {k: v.numpy().tolist() for k, v in obj.items()}
    )
    path.write_text(json.dumps(data))


def load_json(path, device=None):
    return sadl.tensor(np.array(json.loads(path.read_text())), device=device)


@hookimpl
def register_formats():
    return [FormatDef("fakejson", (".fakejson",), save_json, load_json, magic=b"[")]
