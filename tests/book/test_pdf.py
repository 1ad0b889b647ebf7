"""The whole book as one PDF: produced by the build's own command, offline, and it opens; an unchanged book is not
printed twice; it reads like a printed book.

`make print-pdf` (what `make pdf` and `make book` run after the HTML build) prints the test
session's fresh build: the single-page HTML is built from its execution cache (nothing is
executed again) and printed by headless Chromium (book/_ext/print_pdf.py). The PDF is then
read with pypdfium2 (PDFium's own text layer and bookmarks): it has the pages of a book, every
chapter's title, the quizzes' answers printed open, the bibliography with the labels the text
cites, and the version; its first page is a title page from CITATION.cff, a table of contents
with the right page numbers follows, its bookmarks are the book's headings once each, no line
of code it shows is cut at the margin and the code the pages hide is not printed.

The book's own headings, against which the PDF is checked, are read from the single-page HTML
(`_build/singlehtml/book/intro.html`), where each page's title follows a marker
`<span id="document-book/...">`; its mathematics, written there as TeX, may be printed in any
form (α for \\alpha) but not left out.
"""
from __future__ import annotations

import datetime
import html
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pypdfium2
import pytest
import yaml

from bookpages import ROOT, needs_chromium, toc_documents
from test_code_width import FENCE, code_lines

pytestmark = [pytest.mark.slow, needs_chromium]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
TITLES = ["Why decoding is memory-bound", "The acceptance criterion", "The residual distribution and exactness",
          "The acceptance rate is one minus total variation", "Tokens per step", "Speedup and the optimal draft length",
          "From formulas to machines", "Beyond a single chain", "Mistakes in the wild", "Bibliography", "Execution report"]
MM = 72 / 25.4  # PDF points per millimetre
MARGINS_MM = {"top": 15, "bottom": 15, "left": 14, "right": 14}  # print_pdf.MARGIN
HIDING_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell"}  # the cell's code is not printed
MIN_SAMPLE = 30  # code lines this long or longer are looked for in the PDF: shorter ones ("plt.show()") recur


@pytest.fixture(scope="module")
def pdf(book_out) -> Path:
    result = subprocess.run(["make", "-s", "print-pdf", f"BOOK_OUT={book_out}", f"JB={JUPYTER_BOOK}",
                             f"PY={sys.executable}"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return book_out / "_build" / "html" / "speclab.pdf"


# --- what the PDF holds ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bookmark:
    level: int
    title: str
    page: int  # from 1, as the footer numbers them
    path: tuple[str, ...] = ()  # the titles of the bookmarks it sits under


@dataclass
class Printed:
    pages: list[str]  # each page's text inside the printed area (what the margins would cut is not there)
    bookmarks: list[Bookmark]


def read_pdf(path: Path) -> Printed:
    doc = pypdfium2.PdfDocument(path)
    try:
        pages = []
        for page in doc:
            width, height = page.get_size()
            textpage = page.get_textpage()
            pages.append(textpage.get_text_bounded(MARGINS_MM["left"] * MM, MARGINS_MM["bottom"] * MM,
                                                   width - MARGINS_MM["right"] * MM, height - MARGINS_MM["top"] * MM))
        bookmarks, above = [], []
        for item in doc.get_toc():
            dest = item.get_dest()
            del above[item.level:]
            bookmarks.append(Bookmark(item.level, item.get_title(), dest.get_index() + 1 if dest else 0, tuple(above)))
            above.append(item.get_title())
        return Printed(pages, bookmarks)
    finally:
        doc.close()


@pytest.fixture(scope="module")
def printed(pdf) -> Printed:
    return read_pdf(pdf)


def flat(text: str) -> str:
    return " ".join(text.split())


def bare(text: str) -> str:
    """Text with no whitespace at all: a line of code the PDF wrapped is still found whole (PDFium
    reads a hyphen that ends a printed line as U+FFFE)."""
    return re.sub(r"\s+", "", text).replace("\ufffe", "-")


# --- what the book holds --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Heading:
    doc: str  # the page it is on, as _toc.yml names it
    text: str  # as the HTML writes it, mathematics as TeX between \( \)
    pattern: re.Pattern  # the text as printed: each piece of mathematics in any non-empty form

    def matches(self, title: str) -> bool:
        return bool(self.pattern.fullmatch(flat(title)))


MATH = re.compile(r'<span class="math notranslate nohighlight">(.*?)</span>', re.DOTALL)
MARKER_OR_HEADING = re.compile(r'<span id="document-([^"]+)"></span>|<h([1-6])[^>]*>(.*?)</h\2>', re.DOTALL)


def heading_from_html(doc: str, inner: str) -> Heading:
    inner = re.sub(r'<a class="headerlink".*?</a>', "", inner, flags=re.DOTALL)

    def strip(part: str) -> str:  # the text of a piece of HTML
        return flat(html.unescape(re.sub(r"<[^>]+>", "", part)))

    texts = [strip(t) for t in MATH.split(inner)[::2]]  # the text around each piece of mathematics
    pattern = r"\s*\S(?:.*?\S)?\s*".join(re.escape(t) for t in texts)
    return Heading(doc, strip(MATH.sub(lambda m: m.group(1), inner)), re.compile(pattern))


def book_headings(singlehtml_page: Path, root: str) -> list[Heading]:
    """Every heading of the single-page book's article, in order."""
    text = singlehtml_page.read_text()
    text = text[text.index('<article class="bd-article">'):]
    found, doc = [], root
    for match in MARKER_OR_HEADING.finditer(text):
        if match.group(1):
            doc = match.group(1)
        else:
            found.append(heading_from_html(doc, match.group(3)))
    return found


def chapter_titles(headings: list[Heading], docs: dict[str, int]) -> dict[str, Heading]:
    """Each page's title: its first heading."""
    first: dict[str, Heading] = {}
    for h in headings:
        first.setdefault(h.doc, h)
    missing = [d for d in docs if d not in first]
    assert not missing, f"pages of _toc.yml with no heading in the single-page book: {missing}"
    return {d: first[d] for d in docs}


@pytest.fixture(scope="module")
def book(book_out):
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    headings = book_headings(book_out / "_build" / "singlehtml" / "book" / "intro.html", toc["root"])
    docs = toc_documents(toc)
    return headings, chapter_titles(headings, docs), docs


def code_of_the_book() -> tuple[list[str], list[str]]:
    """(printed, hidden): the lines of code of book/**/*.md of at least MIN_SAMPLE characters, in
    cells and blocks the PDF shows, and in cells whose code it leaves out (HIDING_TAGS)."""
    printed, hidden = [], []
    for page in sorted((ROOT / "book").glob("**/*.md")):
        text = page.read_text()
        hidden_lines = hidden_cell_lines(text)
        for number, line in code_lines(text):
            if len(line.strip()) >= MIN_SAMPLE:
                (hidden if number in hidden_lines else printed).append(line)
    return printed, hidden


def hidden_cell_lines(text: str) -> set[int]:
    """The numbers (from 1) of the lines of code cells tagged with one of HIDING_TAGS."""
    lines, hidden, i = text.splitlines(), set(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i].strip())
        i += 1
        if not opening or not opening.group(2).startswith("{code-cell}"):
            continue
        options = []
        if i < len(lines) and lines[i].strip() == "---":
            i += 1
            while i < len(lines) and lines[i].strip() != "---":
                options.append(lines[i])
                i += 1
            i += 1
        while i < len(lines) and lines[i].startswith(":"):
            options.append(lines[i].lstrip(":"))
            i += 1
        settings = yaml.safe_load("\n".join(options)) if options else None
        tags = set(settings.get("tags") or []) if isinstance(settings, dict) else set()
        start = i
        while i < len(lines) and lines[i].strip() != opening.group(1):
            i += 1
        if tags & HIDING_TAGS:
            hidden.update(range(start + 1, i + 1))
        i += 1
    return hidden


# --- the checks, as functions of what was read, so that each can be shown to fail ------------------------------

def citation() -> dict:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    date = cff["date-released"]
    date = date if isinstance(date, datetime.date) else datetime.date.fromisoformat(str(date))
    authors = [a.get("name") or " ".join(a[k] for k in ("given-names", "family-names") if a.get(k))
               for a in cff["authors"]]
    return {"title": cff["title"], "version": str(cff["version"]), "date": date, "authors": authors}


def title_page_problems(first_page: str, cff: dict) -> list[str]:
    text = flat(first_page)
    problems = [f"{what} {value!r} is not on page 1" for what, value in
                [("the title", cff["title"]), ("the version", cff["version"])]
                + [("the author", a) for a in cff["authors"]] if value not in text]
    dates = [cff["date"].isoformat(), f"{cff['date'].day} {cff['date']:%B %Y}"]
    if not any(d in text for d in dates):
        problems.append(f"the date ({' or '.join(dates)}) is not on page 1")
    return problems


def contents_problems(printed: Printed, chapters: dict[str, Heading], depths: dict[str, int]) -> list[str]:
    """Each page of _toc.yml is listed on the pages after the title page and before the first
    chapter, followed by the page its bookmark (at its depth in _toc.yml) leads to."""
    first = min((b.page for b in printed.bookmarks if b.level == 0), default=len(printed.pages))
    contents = flat(" ".join(printed.pages[1:max(first - 1, 1)]))
    problems = []
    for doc, heading in chapters.items():
        pages = [b.page for b in printed.bookmarks if b.level == depths[doc] and heading.matches(b.title)]
        listed = [int(m.group(1)) for m in re.finditer(heading.pattern.pattern + r" (\d+)\b", contents)]
        if not listed:
            problems.append(f"{doc}: {heading.text!r} is not listed with a page number in the contents")
        elif len(pages) != 1 or pages[0] not in listed:
            problems.append(f"{doc}: the contents give page {listed} for {heading.text!r}, its bookmarks {pages}")
    return problems


def bookmark_problems(bookmarks: list[Bookmark], headings: list[Heading], chapters: dict[str, Heading]) -> list[str]:
    """Every bookmark is a heading of the book, printed once; every page of _toc.yml has one."""
    problems = [f"bookmark {b.title!r} (page {b.page}) is no heading of the book" for b in bookmarks
                if not any(h.matches(b.title) for h in headings)]
    seen: set[tuple] = set()
    for b in bookmarks:
        key = (b.path, b.title)
        if key in seen:
            problems.append(f"bookmark {' > '.join(key[0] + (b.title,))!r} twice")
        seen.add(key)
    problems += [f"{doc}: no bookmark for {h.text!r}" for doc, h in chapters.items()
                 if not any(h.matches(b.title) for b in bookmarks)]
    return problems


def cut_code(pages: list[str], code: list[str]) -> list[str]:
    """The lines of code not found whole in the printed area."""
    text = bare("".join(pages))
    return [line.strip() for line in code if bare(line) not in text]


FOLD_LABELS = re.compile(r"(Show|Hide) code cell (source|content|outputs?)")  # a folded cell's <summary>


def printed_hidden_code(pages: list[str], hidden: list[str], shown: list[str]) -> list[str]:
    """The lines of hidden cells found in the PDF (those also shown elsewhere are not evidence),
    and the labels of folded cells, which print as a box with no code in it."""
    text, shown_text = bare("".join(pages)), bare("\n".join(shown))
    labels = [f"page {n}: {m.group(0)!r}" for n, page in enumerate(pages, 1) for m in FOLD_LABELS.finditer(page)]
    return [line.strip() for line in hidden if bare(line) in text and bare(line) not in shown_text] + labels


# --- the tests ------------------------------------------------------------------------------------------------

def test_the_pdf_opens_and_holds_the_whole_book(pdf):
    doc = pypdfium2.PdfDocument(pdf)
    pages = len(doc)
    text = "\n".join(doc[i].get_textpage().get_text_range() for i in range(pages))
    doc.close()
    flat_text = flat(text)
    print(f"{pdf}: {pages} pages, {pdf.stat().st_size / 1e6:.1f} MB")
    assert pages >= 60
    missing = [t for t in TITLES if t not in flat_text]
    assert not missing, f"chapters missing from the PDF: {missing}"
    assert flat_text.count("The quiz as text, with answers") >= 9 and flat_text.count("Answers") >= 9, \
        "quizzes not printed open"
    assert "Chen et al., 2023" in flat_text and "Leviathan et al., 2023" in flat_text
    assert "speclab 0.1.0" in flat_text or "version 0.1.0" in flat_text


def test_the_first_page_is_a_title_page_from_the_citation_file(printed):
    problems = title_page_problems(printed.pages[0], citation())
    assert not problems, "\n".join(problems) + f"\npage 1 reads: {flat(printed.pages[0])[:400]!r}"


def test_a_table_of_contents_lists_every_page_with_its_page_number(printed, book):
    _, chapters, depths = book
    problems = contents_problems(printed, chapters, depths)
    assert not problems, "\n".join(problems)


def test_the_bookmarks_are_the_books_headings_once_each(printed, book):
    headings, chapters, _ = book
    print("\n".join(f"{'  ' * b.level}{b.title}  [{b.page}]" for b in printed.bookmarks[:15]))
    problems = bookmark_problems(printed.bookmarks, headings, chapters)
    assert not problems, f"{len(problems)} problems with the PDF's bookmarks:\n" + "\n".join(problems[:40])


def test_the_bookmark_check_finds_a_duplicate_a_mangled_title_and_a_missing_chapter():
    def heading(doc, inner):
        return heading_from_html(doc, inner)

    headings = [heading("book/a", '<span class="section-number">1. </span>Alpha<a class="headerlink" href="#">#</a>'),
                heading("book/a", '<span class="section-number">1.1. </span>Estimating '
                                  '<span class="math notranslate nohighlight">\\(\\alpha\\)</span> from logs'),
                heading("book/a", "Summary"),
                heading("book/b", '<span class="section-number">2. </span>Beta')]
    chapters = {"book/a": headings[0], "book/b": headings[3]}
    good = [Bookmark(0, "1. Alpha", 3), Bookmark(1, "1.1. Estimating α from logs", 3, ("1. Alpha",)),
            Bookmark(1, "Summary", 4, ("1. Alpha",)), Bookmark(0, "2. Beta", 5),
            Bookmark(1, "Summary", 6, ("2. Beta",))]  # one "Summary" per chapter is no duplicate
    assert bookmark_problems(good, headings, chapters) == []
    bad = [Bookmark(0, "1. Alpha", 3), Bookmark(1, "1.1. 1.1. Estimating  from logs", 3, ("1. Alpha",)),
           Bookmark(1, "Summary", 4, ("1. Alpha",)), Bookmark(1, "Summary", 4, ("1. Alpha",))]
    problems = bookmark_problems(bad, headings, chapters)
    assert problems == ["bookmark '1.1. 1.1. Estimating  from logs' (page 3) is no heading of the book",
                        "bookmark '1. Alpha > Summary' twice",
                        "book/b: no bookmark for '2. Beta'"], problems


def test_no_line_of_code_is_cut_and_hidden_code_is_not_printed(printed):
    shown, hidden = code_of_the_book()
    assert len(shown) > 100 and hidden, (len(shown), len(hidden))
    cut = cut_code(printed.pages, shown)
    assert not cut, f"{len(cut)} of {len(shown)} lines of code are not printed whole:\n" + "\n".join(cut[:30])
    leaked = printed_hidden_code(printed.pages, hidden, shown)
    assert not leaked, f"{len(leaked)} lines of hidden cells are printed:\n" + "\n".join(leaked[:30])


def test_the_code_scanner_tells_hidden_cells_from_shown_ones():
    page = "\n".join([
        "```{code-cell} ipython3",       # 1
        ":tags: [hide-input]",           # 2
        "hidden = 1",                    # 3
        "```",                           # 4
        "```{code-cell} ipython3",       # 5
        "---",                           # 6
        "tags: [remove-output]",         # 7
        "---",                           # 8
        "shown = 2",                     # 9
        "```",                           # 10
        "```{code-cell} ipython3",       # 11
        "---",                           # 12
        "tags:",                         # 13
        "  - hide-cell",                 # 14
        "---",                           # 15
        "also_hidden = 3",               # 16
        "```",                           # 17
    ])
    assert hidden_cell_lines(page) == {3, 16}


def test_a_missing_single_page_book_is_refused(tmp_path):
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import print_pdf

    with pytest.raises(FileNotFoundError, match="no single-page book"):
        print_pdf.print_pdf(tmp_path, tmp_path / "x.pdf")


def test_an_unchanged_book_is_not_printed_again(pdf, book_out):
    """Issue 51: `make book` reprinted the whole PDF on every run. The digest of what it is printed from is kept
    beside it; a second `make print-pdf` on the same build says the PDF is up to date and leaves it as it is."""
    before = pdf.stat().st_mtime_ns
    result = subprocess.run(["make", "-s", "print-pdf", f"BOOK_OUT={book_out}", f"JB={JUPYTER_BOOK}",
                             f"PY={sys.executable}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "The PDF is up to date" in result.stdout, result.stdout[-2000:]
    assert pdf.stat().st_mtime_ns == before
    assert pdf.with_name("speclab.pdf.digest").read_text().strip() != ""
