"""Implements the register_colours hook that fake_plugins.colours declares."""

from sadl.plugins import hookimpl

from fake_plugins.colours import ColourDef


@hookimpl
def register_colours():
    return [ColourDef("blue", (0, 0, 255))]
