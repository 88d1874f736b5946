"""Adds a hook of its own (``register_greetings``) through the historic add_hookspecs hook."""

import pluggy
from sadl.plugins import hookimpl

hookspec = pluggy.HookspecMarker("sadl")


class Specs:
    @hookspec
    def register_greetings(self):
        """Return greeting strings."""


@hookimpl
def add_hookspecs(pluginmanager):
    pluginmanager.add_hookspecs(Specs)
