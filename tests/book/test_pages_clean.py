"""The built pages show the reader content, not plumbing: a scan of the built HTML and of the sources.

On every built page:

* no stderr output block and no library warning or traceback text (a `FutureWarning`, a path into
  `site-packages` or the virtual environment);
* no raw TeX in what cells print (a `$...$` span or a TeX macro outside typeset math) and no
  long unreduced fractions such as `833828077/4098931200`;
* no code cell the reader sees without asking that glues numbers into the prose (`glue(`/`put(`):
  such cells are collapsed (`hide-cell`) or hidden;
* no build-machine diagnostic ("the machine that built this page was disturbed"): those go to
  the build log and the execution report.

In the sources: every figure's plotting code is collapsed (outside exercise solutions, where the
code is the answer), and the notation is the notation page's (T always subscripted, temperature
tau, the verification cost v(k)).

Each scanner is also run on a small bad example, so that it is seen to catch what it looks for.
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
from bs4 import BeautifulSoup

from bookpages import ROOT, site_pages

WARNING_TEXT = re.compile(r"\b\w*(Warning|Error)\b:|Traceback \(most recent call last\)|site-packages|/\.venv/")
RAW_TEX = re.compile(r"\$[^$\s][^$\n]{0,120}?\$|\\(?:alpha|frac|mathbb|text|tau|le|ge|cdot|sum|min|max)\b")
LONG_FRACTION = re.compile(r"\b\d{5,}\s*/\s*\d{5,}\b")
PLUMBING = re.compile(r"(?<![\w.])(glue|put)\(")
DIAGNOSTIC = re.compile(r"machine that built this page was disturbed|Measurement note", re.I)
SHOWN = ("tag_hide-input", "tag_hide-cell", "tag_remove-input", "tag_remove-cell")


def output_text(el) -> str:
    """A cell output's text, leaving out typeset math, scripts and the quizzes (their TeX is MathJax's input)."""
    el = BeautifulSoup(str(el), "html.parser")
    for skip in el.select("script, style, .math, .speclab-quiz-static, [data-shufflequestions]"):
        skip.decompose()
    return el.get_text(" ")


def page_problems(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    found = [f"stderr output: {el.get_text(' ')[:120]!r}" for el in soup.select("div.output.stderr")]
    for cell in soup.select("div.cell"):
        classes = cell.get("class", [])
        source = cell.select_one("div.cell_input")
        if source is not None and not any(c in classes for c in SHOWN) and PLUMBING.search(source.get_text()):
            found.append(f"visible plumbing: {source.get_text(' ')[:100]!r}")
    for out in soup.select("div.cell_output"):
        text = output_text(out)
        for pattern, what in ((WARNING_TEXT, "a warning or traceback"), (RAW_TEX, "raw TeX"),
                              (LONG_FRACTION, "an unreduced fraction"), (DIAGNOSTIC, "a build diagnostic")):
            m = pattern.search(text)
            if m:
                found.append(f"{what} in an output: ...{text[max(0, m.start() - 50):m.end() + 50]!r}...")
    body = soup.select_one("article") or soup
    m = DIAGNOSTIC.search(body.get_text(" "))
    if m:
        found.append("a build diagnostic in the page's text")
    return found


@pytest.mark.slow
def test_no_warning_raw_tex_fraction_plumbing_or_diagnostic_on_any_page(html_root):
    report = {p.relative_to(html_root).as_posix(): page_problems(p.read_text()) for p in site_pages(html_root)}
    report = {k: v for k, v in report.items() if v}
    assert not report, "\n".join(f"{p}:\n  " + "\n  ".join(v) for p, v in report.items())


BAD_PAGE = """<article><div class="cell docutils container"><div class="cell_input docutils container">
<pre>put("x", 1)</pre></div><div class="cell_output docutils container">
<div class="output stderr"><pre>/x/.venv/lib/python3.11/site-packages/t.py:1: FutureWarning: gone</pre></div>
<div class="output stream"><pre>$XW$, $T = 1$ ... 833828077/4098931200</pre></div>
<div class="output text_markdown"><p>**Measurement note.** The machine that built this page was disturbed</p></div>
</div></div></article>"""


def test_the_page_scan_catches_each_kind_of_problem():
    found = " | ".join(page_problems(BAD_PAGE))
    for what in ("stderr output", "visible plumbing", "a warning or traceback", "raw TeX", "an unreduced fraction",
                 "a build diagnostic"):
        assert what in found, (what, found)
    hidden = BAD_PAGE.replace('class="cell docutils container"', 'class="cell tag_hide-cell docutils container"')
    assert "visible plumbing" not in " | ".join(page_problems(hidden))


# ------------------------------------------------------------------------------- sources
PAGES = sorted((ROOT / "book").rglob("*.md"))
HIDDEN_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell"}


def visible_figure_cells(path: Path) -> list[str]:
    """Figure cells (MyST-NB `figure` metadata) whose code is shown, outside exercise solutions."""
    text = path.read_text()
    found = []
    for cell in jupytext.reads(text, fmt="md:myst").cells:
        if cell.cell_type != "code" or "figure" not in cell.metadata.get("mystnb", {}):
            continue
        before = text[: text.index(cell.source)]
        in_solution = before.rfind("{solution-start}") > before.rfind("{solution-end}")
        if not in_solution and not HIDDEN_TAGS & set(cell.metadata.get("tags", [])):
            found.append(cell.metadata["mystnb"]["figure"].get("name", cell.source[:60]))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_figure_code_is_collapsed(page):
    assert not visible_figure_cells(page)


# the notation page: T only with a subscript (T_target, T_draft, T_t, T_d), temperature tau, v(k)
NOTATION = [
    (re.compile(r"\\alpha\(T\b|alpha\(T=|\bp_T\b|\bq_T\b"), "temperature written T (the notation page writes tau)"),
    (re.compile(r"\bt\(T\)|\$T = 1\$|\$T\$ separate|T\(5\)/T\(1\)"), "T without a subscript"),
    (re.compile(r"c_\\text\{verify\}"), "c_verify (chapter 7 and the notation page write v(k))"),
]


def notation_problems(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for pattern, what in NOTATION for m in pattern.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_notation_is_the_notation_pages(page):
    if page.stem == "notation":  # it lists other sources' letters on purpose
        return
    assert not notation_problems(page.read_text())


def test_the_notation_check_catches_the_old_spellings():
    old = r"the rate $\alpha(T) = \sum_x \min(p_T(x), q_T(x))$; measured $t(T)/t(1)$; $c_\text{verify}(k)$; T(5)/T(1)"
    assert len(notation_problems(old)) == 6
