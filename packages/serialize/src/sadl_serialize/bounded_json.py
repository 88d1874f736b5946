"""JSON from untrusted files, with its nesting bounded before it is parsed.

``json.loads`` recurses once per nesting level, so ``[[[[...]]]]`` ten thousand deep escapes as
``RecursionError``. Checkpoint metadata and safetensors headers are read with
:func:`loads_bounded` instead: it finds the depth with one pass over the brackets outside
strings and refuses a document nested deeper than ``MAX_DEPTH`` with a ``ValueError``, and it
refuses an object that lists a key twice (``json.loads`` keeps the last one silently).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "loads_bounded", "nesting_depth"]

#: Deeper than any document sadl writes (a checkpoint's optimizer state is about 6 levels).
MAX_DEPTH = 64

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.S)


def nesting_depth(text: str) -> int:
    """How deeply arrays and objects nest in the JSON ``text`` (strings are skipped)."""
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def loads_bounded(text: str, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` and repeated keys."""
    depth = nesting_depth(text)
    if depth > max_depth:
        raise ValueError(f"the JSON nests {depth} levels deep; at most {max_depth} are accepted")
    return json.loads(text, object_pairs_hook=_unique_keys, **kwargs)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} appears twice in one JSON object")
        found[key] = value
    return found
