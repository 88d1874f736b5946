"""Registers names sadl-core already has (op ``tanh``, optimizer ``SGD``, command ``info``,
backend ``cuda``, an op claiming ``np.exp``) and one of its own."""

import numpy as np
from sadl.plugins import OpDef, OptimizerDef, hookimpl

from fake_plugins.clashing import Opt, _backend


def _op(name, **kwargs):
    return OpDef(name, lambda x: x + 0, (lambda g, out, x: g,), **kwargs)


@hookimpl
def register_ops():
    return [_op("tanh"), _op("my_exp", numpy_funcs=(np.exp,)), _op("core_names_op")]


@hookimpl
def register_optimizers():
    return [OptimizerDef("SGD", Opt)]


@hookimpl
def register_backends():
    return [_backend("cuda")]


@hookimpl
def register_commands(subparsers):
    subparsers.add_parser("info").set_defaults(func=lambda args: print("plugin's info") or 0)
    subparsers.add_parser("core-names-cmd").set_defaults(func=lambda args: print("own") or 0)
