"""A plugin that ends the program from its register_ops hook."""

from sadl.plugins import hookimpl


@hookimpl
def register_ops():
    raise SystemExit(4)
