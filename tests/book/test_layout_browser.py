"""Nothing wide is clipped at the book's column width: every display equation, table and code
output of every built page fits the article column, in headless Chromium at 1280 x 900.

With every collapsed block opened (hidden cells, solutions, the quizzes' text copies), each
display equation (MathJax's output), table and code output (`pre` in a cell's output) must
neither need scrolling inside its own box (its content wider than the box: what the reader sees
is cut) nor reach past the right edge of the article column. The last test shows the check can
fail: a page with one output line too long for the column is reported.
"""
from __future__ import annotations

import pytest

from bookpages import needs_chromium, site_pages
from browser import offline_page, open_page, overflowing

pytestmark = [pytest.mark.slow, needs_chromium]


def test_every_equation_table_and_output_fits_the_column(visited, html_root):
    """Each page as the session's one visit found it (tests/book/conftest.py, `visited`)."""
    pages = site_pages(html_root)
    assert len(pages) >= 15 and set(pages) <= set(visited)
    report = {path.relative_to(html_root).as_posix(): visited[path]["overflow"] for path in pages
              if visited[path]["overflow"]}
    assert not report, "\n".join(f"{p}:\n  " + "\n  ".join(items) for p, items in report.items())


def test_an_output_too_wide_for_the_column_is_caught(browser, html_root):
    page = offline_page(browser)
    open_page(page, html_root / "book" / "02_acceptance.html")
    assert overflowing(page) == []
    page.evaluate("""() => {
      const pre = document.querySelector('.cell_output pre');
      pre.textContent = 'x'.repeat(400);
    }""")
    found = overflowing(page)
    assert len(found) == 1 and found[0].startswith("output:"), found


PHONE = {"width": 390, "height": 844}  # a phone held upright (CSS pixels)


def test_the_gpu_table_fits_a_phones_column(browser, html_root):
    """Chapter 7's GPU table fits the article column of a phone whole, with no sideways scrolling (issue 51: it
    was 616 px in a 366 px column); the page's widest table is measured too, to show the check can fail."""
    page = offline_page(browser, **PHONE)
    open_page(page, html_root / "book" / "07_machines.html")
    widths = page.evaluate("""() => [...document.querySelectorAll('.bd-article table')].map(t =>
        [t.scrollWidth, t.clientWidth, t.querySelector('tr').innerText.replace(/\\s+/g, ' ')])""")
    (gpu,) = [w for w in widths if "measured (predicted)" in w[2]]
    assert gpu[0] <= gpu[1], f"the GPU table is {gpu[0]} px wide in a {gpu[1]} px column"
    page.evaluate("""() => { const t = [...document.querySelectorAll('.bd-article table')]
        .find(t => t.innerText.includes('measured (predicted)'));
        t.querySelector('td').textContent = 'x'.repeat(80); }""")
    wide = page.evaluate("""() => { const t = [...document.querySelectorAll('.bd-article table')]
        .find(t => t.innerText.includes('measured (predicted)')); return [t.scrollWidth, t.clientWidth]; }""")
    assert wide[0] > wide[1]  # a cell made too long is seen
