"""Implements the hook that ``extender`` adds; loaded *before* it (sorted by name)."""

from sadl.plugins import hookimpl


@hookimpl
def register_greetings():
    return ["hello"]
