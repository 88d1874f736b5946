"""sadl_serialize: the ``.sadl`` tensor format (safe against hostile files), safetensors, and
training checkpoints, as a sadl plugin.

Through core: ``sadl.save(obj, "w.sadl")`` / ``sadl.load("w.sadl", device=None, mmap=False)``
dispatch here by suffix (``.sadl``, ``.safetensors``) or magic bytes; a ``.sadl`` file holds
nested checkpoint dicts too, never pickle. Directly::

    from sadl_serialize import save, load, save_checkpoint, load_checkpoint, atomic_write
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

from sadl_serialize.atomic import atomic_path, atomic_write
from sadl_serialize.checkpoint import load_checkpoint, save_checkpoint
from sadl_serialize.errors import SadlFormatError
from sadl_serialize.metadata import META_KEY, OBJECT_KEY
from sadl_serialize.objects import dumps, load, loads, save
from sadl_serialize.sadl_format import (
    DTYPE_NAMES,
    MAGIC,
    SINGLE_KEY,
    SUPPORTED_VERSIONS,
    VERSION,
    TensorInfo,
    load_entries,
    read_index,
)
from sadl_serialize.safetensors_format import (
    load_safetensors,
    read_safetensors_index,
    save_safetensors,
)

try:
    __version__ = _dist_version("sadl-serialize")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "DTYPE_NAMES",
    "MAGIC",
    "META_KEY",
    "OBJECT_KEY",
    "SINGLE_KEY",
    "SUPPORTED_VERSIONS",
    "VERSION",
    "SadlFormatError",
    "TensorInfo",
    "atomic_path",
    "atomic_write",
    "dumps",
    "load",
    "load_checkpoint",
    "load_entries",
    "load_safetensors",
    "loads",
    "read_index",
    "read_safetensors_index",
    "save",
    "save_checkpoint",
    "save_safetensors",
]
