"""mkdocs hook: the source files the docs link to become pages of the built site.

The docs link into the code (``[`apply`](../packages/core/src/sadl/_engine.py#L120)``, kept
honest by tools/doc_links.py). Those links work where the Markdown is read next to the code (a
checkout, a forge); a built site holds only the docs, so this hook adds one highlighted,
line-numbered page per linked file (``source/packages/.../_engine.py.html``, anchors ``#L120``)
and points the links there. The site then reads whole offline and from ``file://``.
"""

from __future__ import annotations

import html
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(((?:\.\./)+)(packages/[^)#\s]+\.py)(#L\d+)?\)")
PREFIX = "source"


def _linked_sources(files: Files) -> set[str]:
    found = set()
    for file in files.documentation_pages():
        text = Path(file.abs_src_path).read_text(encoding="utf-8") if file.abs_src_path else ""
        for match in LINK.finditer(text):
            found.add(match.group(2))
    return found


def _page(relative: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = (ROOT / relative).read_text(encoding="utf-8")
    formatter = HtmlFormatter(linenos="inline", lineanchors="L", anchorlinenos=True, wrapcode=True)
    body = highlight(code, PythonLexer(), formatter).replace('id="L-', 'id="L')
    body = body.replace('href="#L-', 'href="#L')
    css = formatter.get_style_defs(".highlight")
    return (
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(relative)}</title>"
        f"<style>body{{font-family:sans-serif;margin:1em 2em}}pre{{line-height:1.35}}"
        f"{css}</style><p><code>{html.escape(relative)}</code></p>{body}"
    )


def on_files(files: Files, config: Any) -> Files:
    """Add a page for every source file a doc page links to."""
    for relative in sorted(_linked_sources(files)):
        if (ROOT / relative).is_file():
            uri = f"{PREFIX}/{relative}.html"
            files.append(File.generated(config, uri, content=_page(relative)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point ``../packages/x.py#L12`` at the generated page, relative to this page."""
    here = posixpath.dirname(page.file.src_uri)

    def replace(match: re.Match[str]) -> str:
        target = f"{PREFIX}/{match.group(2)}.html"
        link = posixpath.relpath(target, here or ".")
        return f"]({link}{match.group(3) or ''})"

    return LINK.sub(replace, markdown)
