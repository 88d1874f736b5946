"""``sadl inspect FILE``: keys, dtypes, shapes and sizes in a ``.sadl`` or ``.safetensors`` file;
for a ``.gguf`` file or a Hugging Face directory, the checkpoint's architecture, parameter count,
dtypes or quantization and tokenizer (:mod:`sadl_serialize.pretrained_inspect`).
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from sadl.cli import CommandError

from sadl_serialize.errors import SadlFormatError
from sadl_serialize.sadl_format import MAGIC, TensorInfo, _load_mapped, _wrap
from sadl_serialize.safetensors_format import read_safetensors_index

__all__ = ["add_inspect_command", "describe", "format_size"]


def add_inspect_command(subparsers: Any) -> None:
    """Add ``inspect`` to the ``sadl`` command line (called from the plugin's hook)."""
    p = subparsers.add_parser(
        "inspect",
        help="list the tensors in a .sadl or .safetensors file, or describe a .gguf file or a "
        "Hugging Face model directory",
        description="List the tensors in a .sadl or .safetensors file after validating it; "
        "describe a .gguf file or a Hugging Face directory (architecture, parameters, dtypes, "
        "tokenizer).",
    )
    p.add_argument("file", help="a .sadl, .safetensors or .gguf file, or a model directory")
    p.set_defaults(func=_cmd_inspect)


def describe(path: str | os.PathLike[str]) -> tuple[str, list[TensorInfo], list[str]]:
    """Validate a file and describe it: (format name, tensors in file order, notes).

    The format is ``"safetensors"`` for the ``.safetensors`` suffix (or a file that looks like
    one), ``"sadl"`` otherwise. For a sadl checkpoint the notes summarise what it holds.
    Raises :class:`SadlFormatError` for a malformed file, ``OSError`` when it cannot be read.
    """
    name = os.fspath(path)
    if _is_safetensors(path):
        return "safetensors", read_safetensors_index(path), []
    index, arrays = _load_mapped(path, name)  # full validation, bool bytes included
    notes = []
    from sadl_serialize.checkpoint import _FIELDS, _KIND, _WHAT
    from sadl_serialize.metadata import META_KEY, OBJECT_KEY, load_object, read_document

    keys = [info.key for info in index]
    if keys[:1] == [OBJECT_KEY]:  # verify its integrity record
        load_object(name, _wrap(index, arrays, None), verify=None)
        notes.append("sadl object (saved with sadl.save; sadl.load gives it back)")
    if keys[:1] == [META_KEY]:
        entries = _wrap(index, arrays, None)
        meta = read_document(path, META_KEY, _KIND, _FIELDS, entries, None, _WHAT)
        parts = [p for p in ("model", "optimizer", "scheduler", "rng", "extra") if p in meta]
        step = meta.get("step")
        notes.append(
            f"sadl checkpoint: step {step if step is not None else '(not saved)'}; holds "
            f"{', '.join(parts) or 'nothing'}"
        )
    return "sadl", index, notes


def _is_safetensors(path: str | os.PathLike[str]) -> bool:
    if os.fspath(path).lower().endswith(".safetensors"):
        return True
    with open(path, "rb") as fh:
        head = fh.read(9)
    return not head.startswith(MAGIC) and len(head) == 9 and head[8:9] == b"{"


def format_size(nbytes: int) -> str:
    """``1536`` -> ``"1.5 KiB"``: a byte count for people."""
    if nbytes < 1024:
        return f"{nbytes} B"
    exponent = min(int(math.log(nbytes, 1024)), 4)
    return f"{nbytes / 1024**exponent:.1f} {('B', 'KiB', 'MiB', 'GiB', 'TiB')[exponent]}"


def _cmd_inspect(args: argparse.Namespace) -> int:
    """Describe the file; a bad file or argument is one line on stderr and exit status 2."""
    path = args.file
    # A file that is missing, unreadable or malformed is bad input: status 2, one line, in the
    # format of every sadl command (sadl.cli).
    try:
        from sadl_serialize.pretrained_inspect import describe_pretrained, is_pretrained

        if is_pretrained(path):
            print("\n".join(describe_pretrained(path)))
            return 0
        kind, index, notes = describe(path)
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CommandError(f"{path}: is a directory, not a file") from None
    except SadlFormatError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except MemoryError:
        raise CommandError(f"{path}: not enough memory to read it") from None
    except (ValueError, RecursionError) as exc:
        raise CommandError(f"{path}: {exc}") from None
    total = sum(info.nbytes for info in index)
    elements = sum(info.size for info in index)
    print(f"{path}: {kind}, {len(index)} tensor{'s' if len(index) != 1 else ''}")
    for note in notes:
        print(note)
    rows = [("KEY", "DTYPE", "SHAPE", "SIZE")]
    rows += [(repr(i.key)[1:-1], i.dtype, _shape(i.shape), format_size(i.nbytes)) for i in index]
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for r in rows:
        print(
            f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2].ljust(widths[2])}  "
            f"{r[3].rjust(widths[3])}"
        )
    print(f"total: {elements:,} elements, {format_size(total)} ({total:,} bytes of data)")
    return 0


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
