"""Fixtures of the book's tests: the built site they check.

`html_root` is the session's fresh build of the book (tests/conftest.py, `fresh_book`, shared
with tests/book/test_book.py and tests/book/test_rendering.py: the book is built once per session), or the
build named by SPECLAB_BOOK_HTML=<folder>/_build/html to check an existing one, e.g.
`SPECLAB_BOOK_HTML=_build/html pytest tests/book`.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from bookpages import CHROMIUM, site_pages


@pytest.fixture(scope="session")
def book_out(request) -> Path:
    """The folder holding the build's _build/ (html, singlehtml, the execution cache)."""
    given = os.environ.get("SPECLAB_BOOK_HTML")
    if given:
        return Path(given).resolve().parents[1]
    result, out = request.getfixturevalue("fresh_book")
    if result.returncode != 0:
        pytest.fail("the book did not build; see test_whole_book_builds_fresh_without_warnings")
    return out


@pytest.fixture(scope="session")
def html_root(book_out) -> Path:
    return book_out / "_build" / "html"


@pytest.fixture(scope="module")
def browser():
    from browser import playwright_browser

    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium): cannot open pages")
    with playwright_browser(CHROMIUM) as b:
        yield b


@pytest.fixture(scope="session")
def visited(html_root) -> dict:
    """Every page of the site opened once, offline, in one tab: page -> {"dom": its DOM once MathJax typeset it,
    "overflow": what is too wide for the column once every collapsed block is open, "errors": the script
    errors it raised}. The math check
    (test_rendering.py) reads the DOM, the layout check (test_layout_browser.py) the overflow."""
    from browser import offline_page, overflowing, playwright_browser, rendered_dom

    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium): cannot open pages")
    out = {}
    with playwright_browser(CHROMIUM) as b:
        tab = offline_page(b)
        errors: list[str] = []  # the page's uncaught script errors (a refused request is not one)
        tab.on("pageerror", lambda err: errors.append(str(err)))
        for path in site_pages(html_root):
            errors.clear()
            dom = rendered_dom(tab, path)  # read before the layout check opens the collapsed blocks
            out[path] = {"dom": dom, "overflow": overflowing(tab), "errors": list(errors)}
    return out
