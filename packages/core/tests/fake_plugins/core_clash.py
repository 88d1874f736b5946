import numpy as np
from sadl.plugins import OpDef, hookimpl


@hookimpl
def register_ops():
    return [
        OpDef("my_tanh", np.tanh, (lambda g, out, x: g * (1 - out * out),), numpy_funcs=(np.tanh,))
    ]
