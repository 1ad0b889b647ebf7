"""Every self-check quiz of the built book, answered in headless Chromium (tests/book/quiz_driver.py).

For each chapter: every stored numeric answer typed in (as printed, and exact) is marked
correct, every listed wrong value and a plainly wrong entry are marked incorrect ("Not quite"),
the right option of every multiple-choice question is marked correct and every other option
incorrect. The last test shows the check can fail: the same page with a numeric question's
`precision` lowered by one (the bug of issue 29, where the reader's entry is rounded to fewer
significant figures than the answer's range allows) is reported.
"""
from __future__ import annotations

import re

import pytest

from browser import offline_page
from bookpages import needs_chromium
from quiz_driver import answer_page
from test_book import CHAPTERS

pytestmark = [pytest.mark.slow, needs_chromium]


@pytest.mark.parametrize("chapter", [c.stem for c in CHAPTERS])
def test_every_quiz_question_accepts_its_answer_and_refuses_wrong_ones(browser, html_root, chapter):
    results = answer_page(offline_page(browser), html_root / "book" / f"{chapter}.html")
    right = sum(r.ok for r in results)
    print(f"{chapter}: {right}/{len(results)} questions answered correctly in the browser "
          f"({sum(r.kind == 'numeric' for r in results)} numeric, {sum(r.kind != 'numeric' for r in results)} multiple choice)")
    assert len(results) >= 4, "the chapter's quiz did not render"
    assert right == len(results), "\n".join(f"question {r.question + 1} ({r.kind}): {p}" for r in results for p in r.problems)


def test_a_quiz_that_rounds_entries_too_coarsely_is_caught(browser, html_root, tmp_path):
    page = html_root / "book" / "05_tokens_per_step.html"
    text = page.read_text()
    assert '"precision": 3' in text
    broken = tmp_path / "book" / page.name
    broken.parent.mkdir()
    broken.write_text(re.sub(r'"precision": 3', '"precision": 2', text, count=1))
    for folder in ("_static", "_images"):  # the page's assets, as in the build
        (tmp_path / folder).symlink_to(html_root / folder, target_is_directory=True)
    results = answer_page(offline_page(browser), broken)
    assert not results[0].right and "3.69" in results[0].problems[0], results[0]
    assert all(r.ok for r in results[1:])
