"""sadl_serialize: a sadl plugin package."""

__version__ = "0.1.0"
