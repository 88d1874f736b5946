"""sadl_layers: a sadl plugin package."""

__version__ = "0.1.0"
