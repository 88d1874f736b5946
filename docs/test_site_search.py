"""The built site from disk: a headless Chromium opens a page from ``file://``, types into the
search box and reads a result (tools/mkdocs_offline_search.py makes it so); the notebook's page
holds its figures (tools/mkdocs_notebooks.py).

The browser is Debian's ``chromium`` driven through ``chromium-driver`` (chromedriver) by a few
W3C WebDriver calls over HTTP, so the test needs no Python package beyond mkdocs. Without the
two programs the test is skipped, saying so; under CI (``CI=1``, ``.ci/run`` installs them) it
fails instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # W3C WebDriver's key for an element reference
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def need(condition: object, why: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI must run this test; .ci/run installs what it needs)")
        pytest.skip(why)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site `nox -s docs` built (SADL_DOCS_SITE), or one built here."""
    if os.environ.get("SADL_DOCS_SITE"):
        return Path(os.environ["SADL_DOCS_SITE"])
    need(importlib.util.find_spec("mkdocs"), "mkdocs is not installed (nox -s docs has it)")
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        check=True,
    )
    return out


class WebDriver:
    """Just enough of the W3C WebDriver protocol: a session, navigation, elements, keys."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        options = {
            "binary": BROWSER,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"],
        }
        caps = {"browserName": "chrome", "goog:chromeOptions": options}
        self.session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})[
            "sessionId"
        ]

    def call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"WebDriver {method} {path}: {exc.read().decode()}") from None

    def do(self, method: str, path: str, body: dict | None = None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def find(self, css: str) -> str:
        return self.do("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def find_all(self, css: str) -> list[str]:
        found = self.do("POST", "/elements", {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in found]

    def wait_for(self, css: str, timeout: float = 20.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.find_all(css)
            if found:
                return found
            time.sleep(0.1)
        title = self.do("POST", "/execute/sync", {"script": "return document.title", "args": []})
        raise AssertionError(f"nothing matches {css!r} after {timeout} s on the page {title!r}")


@pytest.fixture(scope="module")
def browser():
    need(
        BROWSER and DRIVER, "no chromium and chromedriver: apt-get install chromium chromium-driver"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    driver = subprocess.Popen(
        [DRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        web = WebDriver(port)
        yield web
        web.do("DELETE", "")
    finally:
        driver.terminate()
        driver.wait(timeout=30)


def test_the_notebook_is_a_page_with_its_figures(site):
    page = (site / "examples" / "digits.html").read_text(encoding="utf-8")
    figures = re.findall(r'<img alt="output of cell \d+" src="(digits_files/[^"]+)"', page)
    assert len(figures) >= 3, figures  # curves, confusion matrix, digits (and the graph)
    for name in figures:
        head = (site / "examples" / name).read_bytes()[:64]
        assert head.startswith(b"\x89PNG") or b"<svg" in head or b"<?xml" in head, name
    assert (site / "examples" / "digits.ipynb").is_file()  # the download link's target


def test_search_from_disk_finds_a_page_and_links_to_it(site, browser):
    page = site / "concepts" / "autograd.html"
    browser.do("POST", "/url", {"url": page.as_uri()})
    button = browser.find('a[data-bs-target="#mkdocs_search_modal"]')  # "Search" in the nav bar
    browser.do("POST", f"/element/{button}/click", {})
    box = browser.find("#mkdocs-search-query")
    browser.wait_for("#mkdocs_search_modal.show")
    browser.do("POST", f"/element/{box}/value", {"text": "hookimpl"})
    links = browser.wait_for("#mkdocs-search-results article h3 a")
    titles = [browser.do("GET", f"/element/{link}/text") for link in links]
    hrefs = [browser.do("GET", f"/element/{link}/property/href") for link in links]
    print(f"search for 'hookimpl' from {page.as_uri()}: {len(links)} results: {titles[:5]}")
    assert any("/plugins.html#" in h for h in hrefs), hrefs  # "Writing a plugin" is among them
    first = Path(urllib.request.url2pathname(hrefs[0].removeprefix("file://").split("#")[0]))
    assert first.is_file() and site in first.parents, hrefs[0]  # a result links to a page on disk
    # Nonsense finds nothing, and says so.
    browser.do("POST", f"/element/{box}/clear", {})
    browser.do("POST", f"/element/{box}/value", {"text": "zzzqqqxxy"})
    empty = browser.wait_for("#mkdocs-search-results p")
    assert browser.do("GET", f"/element/{empty[0]}/text") == "No results found"
