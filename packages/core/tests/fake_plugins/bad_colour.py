"""Returns something that is not a ColourDef from register_colours."""

from sadl.plugins import hookimpl


@hookimpl
def register_colours():
    return ["green"]
