from sadl.plugins import OpDef, hookimpl


@hookimpl
def register_ops():
    return [OpDef("fake_cube", lambda x: x**3, (lambda g, out, x: 3 * g * x * x,))]
