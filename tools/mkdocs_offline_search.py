"""mkdocs hook: the built site's search works from disk (``file://``), not only from a server.

mkdocs' search runs in a web worker that fetches ``search/search_index.json``; a browser refuses
both to a page opened from disk. After the build this hook writes the index as a script
(``search/search_index.js``, which a ``<script>`` tag loads from anywhere) and replaces
``search/main.js`` with tools/mkdocs_offline_search.js, which builds the same lunr index in the
page itself. docs/test_site_search.py checks it in a headless Chromium, from ``file://``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("mkdocs_offline_search.js")


def on_post_build(config: Any, **kwargs: Any) -> None:
    """Write ``search/search_index.js`` and the worker-free ``search/main.js``."""
    search = Path(config["site_dir"]) / "search"
    index = search / "search_index.json"
    if not index.is_file():  # the search plugin is off: nothing to do
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    payload = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    (search / "search_index.js").write_text(f"window.sadl_search_index = {payload};\n")
    (search / "main.js").write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    (search / "worker.js").unlink(missing_ok=True)  # nothing starts it any more
