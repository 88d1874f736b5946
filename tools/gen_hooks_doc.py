"""Write docs/hooks.md from the hookspec docstrings, which are the hook reference.

Usage: python tools/gen_hooks_doc.py [--check]

With ``--check`` nothing is written; the exit status is 1 when docs/hooks.md differs from what
the docstrings say (docs/test_docs.py runs this check, so the page cannot drift).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "hooks.md"

INTRO = """\
# Hook reference

Generated from the docstrings of `sadl/_hookspecs.py` (and of the hookspec modules of plugin
packages, below) by `python tools/gen_hooks_doc.py`; edit those, not this page. Implement a hook
by decorating a function of your plugin module with `sadl.plugins.hookimpl` and giving it the
hook's exact name. The `register_*` hooks take no arguments and return an iterable of frozen
records, importable from `sadl.plugins` (a plugin package's own from that package). A hook name
sadl does not know is reported as an error naming the closest known hook.
"""

OUTRO = """\
## `Example`

`Example(*inputs, domain=(-2.0, 2.0), **params)`: one sample call, for `sadl check-plugins` and
the `sadl.testing` checks. What the parts mean depends on the record it belongs to:

| in | positional `inputs` | keyword `params` |
|---|---|---|
| `OpDef(..., examples=...)` | the op's inputs | the op's params |
| `LayerDef(..., examples=...)` | the forward pass's inputs | the constructor's keywords |
| `OptimizerDef(...)` | 3 parameter shapes; a scheduler's `step()` args | constructor keywords |

An optimizer's example without inputs steps parameters of shapes (3, 4), (5,) and (2,); the
last never gets a gradient. A scheduler's inputs are passed to every `step()` (a metric).

An input that is a tuple of ints is a shape, filled with random float64 values from `domain`; a
floating NumPy array is used as given. Both are differentiated. Anything else (an integer or
boolean array, a string, a Python number) is passed through as a constant.
`sadl.testing.materialize(example, rng)` gives the concrete `(inputs, params)` it stands for.

## Records and helpers

* `require_api("1.0")` at the top of a plugin module makes it load only on a core that provides
  plugin API 1.x (status `incompatible` otherwise). `sadl.plugins.API_VERSION` is the core's.
* `sadl.plugins.plugins()` lists plugins as dicts; `sadl.plugins.reload_plugins()` discovers again;
  `sadl.plugins.known_providers()` says which first-party package provides which name;
  `sadl.plugins.install_command(distribution, extra=None)` is a command that installs it from
  where the user is (for a plugin's own "this needs X" messages).
* `sadl.plugins.records(kind)` returns the registered records of a kind by name;
  `sadl.plugins.records_hookspec(record_type, label)` declares a `register_<kind>` hook of a
  plugin package's own (see above).
* Errors: `PluginError`, `PluginConflictError`, `IncompatiblePluginError`, `UnknownNameError`;
  warnings: `SadlPluginWarning`.
* What else a plugin may import from sadl:
  [the public plugin-author API](architecture.md#the-public-plugin-author-api).
"""


#: Hooks that first-party plugin packages declare (through ``add_hookspecs``): module, package.
PLUGIN_HOOKSPECS = [("sadl_compile.hookspecs", "sadl-compile")]

PLUGIN_INTRO = """\
## Hooks that plugin packages add

A plugin package may declare hooks of its own through `add_hookspecs`; a `register_*` hook
declared with `sadl.plugins.records_hookspec(record_type, label)` is collected like core's
(records checked, attributed, listed by `sadl plugins`, read with `sadl.plugins.records(kind)`).
Implementing one needs that package installed; otherwise the hook is reported as unknown.
"""


def hooks(module: str = "sadl._hookspecs") -> list[tuple[str, str, str]]:
    """(name, signature, docstring) of every hook of ``module``, in the order of the source file."""
    hookspecs = importlib.import_module(module)
    found = []
    for name, func in vars(hookspecs).items():
        if callable(func) and getattr(func, "sadl_spec", None) is not None:
            signature = str(inspect.signature(func)).replace("'", "")
            signature = signature.replace("argparse._SubParsersAction", "Any")
            found.append((name, signature, inspect.getdoc(func) or ""))
    return found


def to_markdown(doc: str) -> str:
    """reST-flavoured docstring -> Markdown: ``code`` -> `code`, ``Example::`` -> a fenced block."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1])
            block: list[str] = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i])
                i += 1
            out += ["", "```python", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(line)
        i += 1
    text = "\n".join(out)
    # Inline code outside the fenced blocks: ``x`` -> `x` (it may span a line break).
    pieces = re.split(r"(```python\n.*?\n```)", text, flags=re.S)
    pieces = [
        p if p.startswith("```") else re.sub(r"``(.+?)``", r"`\1`", p, flags=re.S) for p in pieces
    ]
    return "".join(pieces).strip() + "\n"


def render() -> str:
    """The whole page."""
    parts = [INTRO]
    for name, signature, doc in hooks():
        parts.append(f"## `{name}`\n\n`{name}{signature}`\n\n{to_markdown(doc)}")
    parts.append(PLUGIN_INTRO)
    for module, distribution in PLUGIN_HOOKSPECS:
        for name, signature, doc in hooks(module):
            declared = f"Declared by {distribution} (`{module}`)."
            parts.append(f"### `{name}`\n\n`{name}{signature}`\n\n{declared}\n\n{to_markdown(doc)}")
    parts.append(OUTRO)
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    """Write the page, or with ``--check`` compare it."""
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run python tools/gen_hooks_doc.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
