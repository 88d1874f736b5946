"""The sadl plugin module of sadl_serialize (entry point ``serialize`` in ``sadl.plugins``).

Registers the ``sadl``, ``safetensors`` and ``gguf`` (read-only) formats for ``sadl.save`` /
``sadl.load`` and the ``sadl inspect`` command.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from sadl.plugins import FormatDef, hookimpl, require_api

require_api("1.0")


@hookimpl
def register_formats() -> Iterable[FormatDef]:
    """``.sadl`` (magic ``b"SADL"``), ``.safetensors`` and ``.gguf`` (read only)."""
    from sadl_serialize.gguf_format import MAGIC as GGUF_MAGIC
    from sadl_serialize.gguf_format import load_gguf, save_gguf
    from sadl_serialize.objects import load, save
    from sadl_serialize.sadl_format import MAGIC
    from sadl_serialize.safetensors_format import load_safetensors, save_safetensors

    return [
        FormatDef("sadl", (".sadl",), save, load, magic=MAGIC),
        FormatDef("safetensors", (".safetensors",), save_safetensors, load_safetensors),
        FormatDef("gguf", (".gguf",), save_gguf, load_gguf, magic=GGUF_MAGIC),
    ]


@hookimpl
def register_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``sadl inspect FILE``."""
    from sadl_serialize.cli import add_inspect_command

    add_inspect_command(subparsers)
