"""Plugins that clash in every kind: ``clash_a``, ``clash_b`` and ``clash_c`` each register the
same op, layer, optimizer, model, format (name and suffix), backend and command, an
op of their own name that claims ``np.sinc``, and names of their own (``<tag>_op``, ``Own<tag>``).
"""

import numpy as np
import sadl
from sadl.plugins import (
    BackendDef,
    FormatDef,
    LayerDef,
    ModelDef,
    OpDef,
    OptimizerDef,
    hookimpl,
)


class Layer(sadl.nn.Module):
    def forward(self, x):
        return x


class Opt(sadl.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    def update(self, param, grad, state, group):
        pass


def _backend(name):
    return BackendDef(
        name,
        "numpy",
        ("numpy.ndarray",),
        to_host=np.asarray,
        from_host=lambda a, i: a,
        device_index=lambda a: 0,
        device_count=lambda: 1,
        generator=lambda seed, i: np.random.default_rng(seed),
        synchronize=lambda i: None,
    )


def hooks(tag, shared=True):
    """The hook implementations of plugin ``tag``: the shared names (if ``shared``) and its own."""

    def op(name, **kwargs):
        return OpDef(name, lambda x: x + 0, (lambda g, out, x: g,), doc=f"from {tag}", **kwargs)

    def fmt(name, suffix):
        return FormatDef(name, (suffix,), lambda obj, path: None, lambda path, device=None: tag)

    def with_shared(own, common):
        return [own, common] if shared else [own]

    @hookimpl
    def register_ops():
        own = [op(f"{tag}_op")]
        return own + [op("clash_op"), op(f"{tag}_sinc", numpy_funcs=(np.sinc,))] if shared else own

    @hookimpl
    def register_layers():
        return with_shared(
            LayerDef(f"Own{tag}", Layer), LayerDef("ClashLayer", type(tag, (Layer,), {}))
        )

    @hookimpl
    def register_optimizers():
        return with_shared(
            OptimizerDef(f"Opt{tag}", Opt), OptimizerDef("ClashOpt", type(tag, (Opt,), {}))
        )

    @hookimpl
    def register_models():
        return with_shared(
            ModelDef(f"{tag}_model", lambda: tag), ModelDef("clash_model", lambda: tag)
        )

    @hookimpl
    def register_formats():
        return with_shared(fmt(f"{tag}_fmt", f".{tag}"), fmt("clash_fmt", ".clash"))

    @hookimpl
    def register_backends():
        return with_shared(_backend(f"{tag}dev"), _backend("clashdev"))

    @hookimpl
    def register_commands(subparsers):
        for name in [f"{tag}-cmd", "clash-cmd"] if shared else [f"{tag}-cmd"]:
            parser = subparsers.add_parser(name, help=f"{name} of {tag}")
            parser.add_argument("--flag", action="store_true")
            parser.set_defaults(func=lambda args, name=name: print(f"{name} from {tag}") or 0)

    return {k: v for k, v in locals().items() if k.startswith("register_")}
