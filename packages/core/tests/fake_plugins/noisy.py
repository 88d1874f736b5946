"""A plugin that prints while it is imported, registers and adds its command."""

from sadl.plugins import OpDef, hookimpl

print("noisy: hello from import")


@hookimpl
def register_ops():
    print("noisy: registering ops")
    double = OpDef("noisy_double", lambda x: 2 * x, (lambda g, out, x: 2 * g,))
    return [double]


@hookimpl
def register_commands(subparsers):
    print("noisy: adding a command")
    parser = subparsers.add_parser("noisy", help="print something")
    parser.set_defaults(func=lambda args: print("noisy command ran") or 0)
