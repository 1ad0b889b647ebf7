"""The built book renders its math offline, in a real browser.

Every content page of a fresh build (the same build as tests/book/test_book.py) is opened in
headless Chromium with the network cut off; MathJax must have typeset every formula and no raw
TeX may be left in the visible text (tests/support/browser.py does the checking). The second test makes
sure the check can fail: the same page with MathJax loaded from a CDN, as the book did before
it served MathJax itself, must be reported.

Needs the Debian package `chromium` (`.ci/run` installs it in CI). Without it the tests skip,
saying so. To check a build you already have: `SPECLAB_BOOK_HTML=_build/html pytest
tests/book/test_rendering.py`; by hand, `python tests/support/browser.py _build/html`.
"""

from __future__ import annotations

import re

import pytest

from browser import book_pages, find_chromium, offline_page, problems_in, rendered_dom
from test_book import toc_files

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium): cannot open pages"
)


@pytest.mark.slow
@needs_chromium
def test_every_page_renders_its_math_offline(html_root, visited):
    """Each page's DOM as the session's one visit read it (tests/book/conftest.py, `visited`; by hand,
    `python tests/support/browser.py _build/html` runs the same check)."""
    pages = book_pages(html_root)
    expected = set(toc_files())
    assert {str(p.relative_to(html_root).with_suffix("")) for p in pages} >= expected
    assert (html_root / "_static" / "mathjax" / "tex-chtml.js").exists(), "MathJax is not in the build"
    assert set(pages) <= set(visited)
    report = {str(p): found for p in pages if (found := problems_in(visited[p]["dom"]))}
    assert not report, "\n".join(f"{page}:\n  " + "\n  ".join(problems) for page, problems in report.items())


@pytest.mark.slow
@needs_chromium
def test_no_page_raises_a_script_error(html_root, visited):
    """Opened offline, no page of the site throws a JavaScript error (the browser's `pageerror`: an uncaught
    exception or a script that does not parse). Every page threw one while sphinx-thebe's configuration was
    declared twice (book/_ext/speclab_book.py, `one_of_each_script`)."""
    report = {str(p.relative_to(html_root)): v["errors"] for p, v in visited.items() if v["errors"]}
    assert visited and not report, "\n".join(f"{page}: {errs[:3]}" for page, errs in report.items())


@pytest.mark.slow
@needs_chromium
def test_a_page_that_throws_is_seen(tmp_path, browser):
    """The check above can fail: a page whose script throws is reported through the same event."""
    from browser import offline_page

    page_file = tmp_path / "throws.html"
    page_file.write_text("<html><body><script>const A = 1;</script><script>const A = 2;</script></body></html>")
    tab = offline_page(browser)
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(str(err)))
    tab.goto(page_file.as_uri(), wait_until="load")
    assert errors and "already been declared" in errors[0], errors


@pytest.mark.slow
@needs_chromium
def test_a_page_with_mathjax_from_the_network_fails_the_check(html_root, tmp_path, browser):
    page = html_root / "book" / "05_tokens_per_step.html"
    text = page.read_text()
    # Sphinx appends a checksum (?v=...) when the file is already in the output folder (a rebuild)
    local = re.compile(r'src="[^"]*_static/mathjax/tex-chtml\.js(\?v=[0-9a-f]+)?"')
    assert local.search(text), "the page does not load the build's own MathJax"
    online = tmp_path / "book" / page.name
    online.parent.mkdir(parents=True)
    online.write_text(local.sub('src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"', text))
    problems = problems_in(rendered_dom(offline_page(browser), online))
    assert any("MathJax produced no output" in p for p in problems), problems
    assert any("raw TeX" in p for p in problems), problems
