from sadl.plugins import hookimpl


@hookimpl
def register_layers():
    return ["not a LayerDef"]
