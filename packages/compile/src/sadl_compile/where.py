"""Which source line made a call: the first frame outside NumPy and sadl's engine."""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from typing import Any

import numpy as np
import sadl

__all__ = ["caller", "orphan_message", "read_message", "source_line"]

_SADL = os.path.dirname(os.path.abspath(sadl.__file__))
_SKIP = (
    os.path.dirname(os.path.abspath(str(np.__file__))),
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    *(
        os.path.join(_SADL, f"{name}.py")
        for name in (
            "_engine",
            "_backward",
            "_tensor",
            "_methods",
            "_conversions",
            "_dispatch",
            "random",
        )
    ),
    os.path.abspath(contextlib.__file__),
)

Where = tuple[str, int, str]


def caller() -> Where:
    """(file, line, function) of the innermost frame outside NumPy and sadl's engine."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_SKIP):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name


def short(where: Any) -> str:
    """``dense.py:45`` for a :func:`caller` result."""
    if not where:
        return ""
    return f"{os.path.basename(where[0])}:{where[1]}"


def source_line(where: Any) -> str:
    """``file.py:12 (`the code`)``: where a call was made, with its line of source."""
    if not where:
        return "an unknown line"
    text = linecache.getline(where[0], where[1]).strip()
    return f"{where[0]}:{where[1]}" + (f" (`{text}`)" if text else "")


def orphan_message() -> str:
    """Why an array that bypassed the tracer cannot be traced, and what to write instead."""
    return (
        "sadl.compile: an array reached a NumPy call without passing through the tracer (it was "
        f"made by an ndarray attribute the tracer does not know), at {source_line(caller())}; "
        "use the NumPy function instead (np.transpose(a) for a.T ...)"
    )


def read_message(what: str, traced: Any, tensor_level: bool) -> str:
    """Why reading a value into Python while tracing is refused, at the caller's line."""
    where = source_line(caller())
    how = {
        "bool": "bool(...) (an `if` or `while` on a tensor, a comparison used as a condition)",
        "item": ".item()",
        "int": "int(...)",
        "float": "float(...)",
        "index": "its use as an index",
        "tolist": ".tolist()",
    }.get(what, what)
    subject = "a tensor's value" if tensor_level else "an array's value"
    return (
        f"sadl.compile: {how} reads {subject} into Python while tracing, at {where}. A compiled "
        "function replays array operations; Python code that depends on values cannot be "
        "replayed. Return the tensor and read it after the call, or keep this code out of the "
        "compiled function."
    )
