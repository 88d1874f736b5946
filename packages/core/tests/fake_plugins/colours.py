"""Declares a record kind of its own (``register_colours``) and registers one colour."""

from dataclasses import dataclass

from sadl.plugins import hookimpl, records_hookspec


@dataclass(frozen=True)
class ColourDef:
    name: str
    rgb: tuple[int, int, int]


class Specs:
    @records_hookspec(ColourDef, "colour")
    def register_colours(self):
        """Return colours as ColourDef records."""


@hookimpl
def add_hookspecs(pluginmanager):
    pluginmanager.add_hookspecs(Specs)


@hookimpl
def register_colours():
    return [ColourDef("red", (255, 0, 0))]
