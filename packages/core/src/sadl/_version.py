"""The versions everyone may ask for: the distribution's and the plugin API's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

__all__ = ["API_VERSION", "__version__"]

try:
    __version__ = _dist_version("sadl-core")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"

#: The plugin API this core provides: ``major.minor``. A plugin written for ``1.x`` (x <= minor)
#: works with it; a new major version means incompatible changes.
API_VERSION = "1.0"
