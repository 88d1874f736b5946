from sadl.plugins import OpDef


def register_ops():
    return [OpDef("undecorated_op", lambda x: x, (lambda g, out, x: g,))]
