"""A plugin whose register_commands ends the program."""

from sadl.plugins import hookimpl


@hookimpl
def register_commands(subparsers):
    raise SystemExit("fake plugin 'exits_in_command' gave up adding its command")
