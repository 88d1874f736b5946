"""mkdocs hook: each notebook of docs/examples/ becomes a page of the site, executed at build time.

The notebook is kept without outputs in the repository (nothing generated is committed). At
each build this hook runs it from top to bottom with nbclient (a fresh Python kernel, in a
temporary directory) and writes ``examples/<name>.md``: its Markdown cells as they are, its code
cells highlighted, their printed text and their figures (PNG and SVG files next to the page).
A cell that raises fails the build, naming the cell; so does a notebook assertion (the digits
notebook asserts its accuracy). The ``.ipynb`` itself is copied beside the page to download.
Needs what docs/requirements.txt lists (nbclient, ipykernel, and the notebook's own imports).
"""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

NOTEBOOKS = "examples"  # under docs/
IMAGES = {"image/png": "png", "image/svg+xml": "svg"}


def execute(path: Path) -> Any:
    """The notebook at ``path``, run in a fresh kernel whose working directory is temporary."""
    try:
        import nbclient
        import nbformat
        from traitlets.config import Config
    except ImportError as exc:
        raise PluginError(
            f"{path.name}: executing the notebook needs nbclient and ipykernel "
            f"({exc}); .venv/bin/python -m pip install -r docs/requirements.txt"
        ) from None
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as cwd:
        client = nbclient.NotebookClient(
            notebook,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": cwd}},
            # Local sockets in the temporary directory, not TCP ports on the machine.
            config=Config({"KernelManager": {"transport": "ipc", "ip": f"{cwd}/kernel"}}),
        )
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as exc:
            raise PluginError(f"{path.name} failed to run:\n{exc}") from None
    return notebook


def to_markdown(notebook: Any, stem: str) -> tuple[str, dict[str, bytes]]:
    """The page's Markdown and its figures, ``{file name: bytes}`` (``<stem>_files/...``)."""
    download = f"[Download the notebook]({stem}.ipynb): it runs as is (the docs build runs it)."
    parts: list[str] = []
    figures: dict[str, bytes] = {}
    for n, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            parts.append(cell.source)
            if n == 0:  # below the title and introduction
                parts.append(download)
        elif cell.cell_type == "code":
            parts.append(f"```python\n{cell.source}\n```")
            for m, output in enumerate(cell.get("outputs", [])):
                data = output.get("data", {})
                kind = next((k for k in IMAGES if k in data), None)
                if kind is not None:
                    name = f"{stem}_files/cell{n}-{m}.{IMAGES[kind]}"
                    raw = data[kind]
                    figures[name] = (
                        raw.encode() if kind == "image/svg+xml" else base64.b64decode(raw)
                    )
                    parts.append(f"![output of cell {n}]({name})")
                elif output.get("output_type") == "stream":
                    parts.append(f"```text\n{output['text'].rstrip()}\n```")
                elif "text/plain" in data:
                    parts.append(f"```text\n{data['text/plain'].rstrip()}\n```")
    return "\n\n".join(parts) + "\n", figures


def on_files(files: Files, config: Any) -> Files:
    """Add ``examples/<name>.md`` and its figures for every ``examples/*.ipynb``, and the
    executed notebook as ``examples/<name>.executed.ipynb`` (outputs included: the docs tests
    check that run rather than running the notebook a second time).
    """
    import nbformat

    docs = Path(config["docs_dir"])
    for path in sorted((docs / NOTEBOOKS).glob("*.ipynb")):
        executed = execute(path)
        markdown, figures = to_markdown(executed, path.stem)
        files.append(File.generated(config, f"{NOTEBOOKS}/{path.stem}.md", content=markdown))
        ran = nbformat.writes(executed)
        files.append(File.generated(config, f"{NOTEBOOKS}/{path.stem}.executed.ipynb", content=ran))
        for name, content in figures.items():
            files.append(File.generated(config, f"{NOTEBOOKS}/{name}", content=content))
    return files
