from sadl.plugins import Example, OpDef, hookimpl, require_api

require_api("1.0")

# The derivative of x**3 is 3x**2, not 2x**2: gradcheck fails on the example and every variant.
WRONG_CUBE = OpDef(
    "fake_wrong_cube",
    lambda x: x**3,
    (lambda g, out, x: 2 * g * x * x,),
    examples=(Example((3,)),),
)


@hookimpl
def register_ops():
    return [WRONG_CUBE]
