"""Print the book's single-page HTML to one PDF, offline, in headless Chromium.

    python book/_ext/print_pdf.py _build/singlehtml _build/html/speclab.pdf

`make pdf` first builds the single-page HTML (``jupyter-book build . --builder singlehtml``,
which reuses the execution cache of `make book`: nothing is executed twice), then runs this.
The page is opened with every request off the machine refused and MathJax (served from the
build itself) is waited for. Then, in the page, before printing:

1. the ``<details>`` a reader opens on paper are opened (the quizzes' text copies with their
   answers, the exercises' solutions); the code cells the book hides (tags hide-input,
   hide-output, hide-cell) stay folded, and the print stylesheet leaves folded ones out;
2. every heading of the book is listed with its number and its title as plain text (its
   mathematics as MathJax's MathML text, its section number once, no "#" link), and given an
   id of its own (the single page repeats ids such as "summary" in every chapter);
3. a title page (title, version, date and authors from CITATION.cff) and a table of contents
   (the parts of _toc.yml, their chapters and sections, with page numbers) are put first.

Chromium prints it to A4 twice: the first print tells on which page each heading lies (the
contents links to every heading, so Chromium writes a named destination for each), those
page numbers go into the contents, and the second print is the PDF. Its bookmarks are written
afterwards with pypdf from the heading list, not by Chromium, whose outline is made of the
glyphs it painted (a heading at a page break came out twice, "1.2. 1.2. The rooflineThe
roofline", and mathematics, drawn by MathJax in CSS, not at all).

Jupyter Book writes the single page at ``<dir>/book/intro.html`` (the root document) but with
links written as if it sat at ``<dir>/``, and sphinx-mathjax-offline points the MathJax script
one folder too deep; the page is therefore copied to ``<dir>/speclab-book.html`` first, where
every link resolves.

Chromium: Debian's `chromium` (/usr/bin/chromium), driven by Playwright (the `playwright` package;
no browser is downloaded).
"""
from __future__ import annotations

import datetime
import html
import logging
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# the flags this machine's Chromium needs headless, as root, with no network
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MARGIN = {"top": "15mm", "bottom": "15mm", "left": "14mm", "right": "14mm"}
FOOTER = ('<div style="font-size:8px;width:100%;text-align:center">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
CONTENTS_DEPTH = 1  # the printed contents lists chapters (level 0) and their sections (level 1)
MAX_PRINTS = 3  # prints until the contents' page numbers are those of the PDF (two when nothing moves)


@dataclass(frozen=True)
class Citation:
    """What the title page says, as CITATION.cff has it."""
    title: str
    version: str
    date: datetime.date
    authors: list[str]
    abstract: str = ""
    url: str = ""

    @property
    def date_text(self) -> str:  # "22 November 2026"
        return f"{self.date.day} {self.date:%B %Y}"

    @property
    def authors_text(self) -> str:
        if len(self.authors) <= 2:
            return " and ".join(self.authors)
        return ", ".join(self.authors[:-1]) + " and " + self.authors[-1]


def author_name(entry: dict) -> str:
    """A CFF person (`given-names` `family-names`) or entity (`name`) as it is printed."""
    if entry.get("name"):
        return str(entry["name"])
    return " ".join(str(entry[k]) for k in ("given-names", "name-particle", "family-names", "name-suffix")
                    if entry.get(k))


def read_citation(path: Path = ROOT / "CITATION.cff") -> Citation:
    import yaml

    cff = yaml.safe_load(path.read_text())
    date = cff["date-released"]  # a date, or a string where the file quotes it
    if not isinstance(date, datetime.date):
        date = datetime.date.fromisoformat(str(date))
    return Citation(title=str(cff["title"]), version=str(cff["version"]), date=date,
                    authors=[author_name(a) for a in cff.get("authors", [])],
                    abstract=" ".join(str(cff.get("abstract", "")).split()), url=str(cff.get("url", "")))


def read_toc(path: Path = ROOT / "_toc.yml") -> tuple[str, list[tuple[str, list[str]]], dict[str, int]]:
    """The root document, the parts as (caption, documents in order), and each document's depth
    (0 for the root and the chapters, 1 for a chapter's sections, ...)."""
    import yaml

    toc = yaml.safe_load(path.read_text())
    depth = {toc["root"]: 0}
    parts = []

    def walk(entries, level, into):
        for entry in entries or []:
            if "file" in entry:
                depth[entry["file"]] = level
                into.append(entry["file"])
            walk(entry.get("sections"), level + 1, into)

    for part in toc.get("parts", []):
        files: list[str] = []
        walk(part.get("chapters"), 0, files)
        parts.append((part.get("caption", ""), files))
    if "chapters" in toc:  # a book without parts
        files = []
        walk(toc["chapters"], 0, files)
        parts.append(("", files))
    return toc["root"], parts, depth


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def single_page(singlehtml: Path) -> Path:
    """The single-page book copied to the folder its links are written for."""
    source = singlehtml / "book" / "intro.html"
    if not source.exists():
        raise FileNotFoundError(f"no single-page book at {source}: run `jupyter-book build . --builder singlehtml`")
    text = source.read_text()
    text = re.sub(r'src="(\.\./)+_static/mathjax/', 'src="_static/mathjax/', text)
    page = singlehtml / "speclab-book.html"
    page.write_text(text)
    return page


def offline_context(browser, **options):
    """A browser context that serves files from disk and refuses every other request."""
    context = browser.new_context(**options)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    return context


# myst-nb folds a hidden cell's input (hide-input, hide-cell) or output (hide-output) into a
# <details class="hide ...">; every other <details> (quiz text copies, answers, solutions) opens.
OPEN_DETAILS_JS = """() => document.querySelectorAll('details').forEach(d => {
    if (!d.matches('.cell details.hide')) d.open = true;
})"""

# Every heading of the article that prints, in order: its own id, its document, its level in the
# book (the document's depth in _toc.yml plus its rank under the document's title) and its
# title as text. Headings inside cell outputs, folded cells, admonitions or figures are not the
# book's sections.
HEADINGS_JS = r"""([rootDoc, depths]) => {
  const article = document.querySelector('article.bd-article');
  const tex = new Map();
  if (window.MathJax && MathJax.startup && MathJax.startup.document)
    for (const item of MathJax.startup.document.getMathItemsWithin(article))
      if (item.typesetRoot) tex.set(item.typesetRoot, item.math);
  const OPERATORS = new Set(['+', '-', '\u2212', '=', '<', '>', '\u2264', '\u2265', '\u00d7', '\u2260', '\u2248', '\u2192']);
  const mathText = (container) => {
    const mml = container.querySelector('mjx-assistive-mml math');
    if (!mml) return tex.get(container) || '';
    const copy = mml.cloneNode(true);
    copy.querySelectorAll('mo').forEach(mo => {
      if (OPERATORS.has(mo.textContent.trim())) mo.textContent = ' ' + mo.textContent.trim() + ' ';
    });
    return copy.textContent;
  };
  const plain = (heading) => {
    const copy = heading.cloneNode(true);
    const originals = heading.querySelectorAll('mjx-container');
    copy.querySelectorAll('mjx-container').forEach((m, i) => m.replaceWith(mathText(originals[i])));
    copy.querySelectorAll('.headerlink').forEach(a => a.remove());
    return copy.textContent.replace(/\s+/g, ' ').trim();
  };
  const found = [];
  let doc = rootDoc, top = null;
  for (const el of article.querySelectorAll('span[id^="document-"], h1, h2, h3, h4, h5, h6')) {
    if (el.tagName === 'SPAN') { doc = el.id.slice('document-'.length); top = null; continue; }
    if (el.closest('.cell_output, details, .admonition, figure, table') || el.getClientRects().length === 0) continue;
    const rank = Number(el.tagName[1]);
    if (top === null) top = rank;
    el.id = 'speclab-heading-' + found.length;
    found.push({id: el.id, doc: doc, level: (depths[doc] || 0) + rank - top, title: plain(el)});
  }
  return found;
}"""

# What only the whole-book PDF needs: the theme prints a page's own title block (.onlyprint) and
# hides the article's first <h1>, which in the single page is the book's opening page's title.
PDF_CSS = """
div.onlyprint { display: none !important; }
.bd-main .bd-content .bd-article h1:first-of-type { display: block; }
"""
ADD_STYLE_JS = """(css) => {
  const style = document.createElement('style');
  style.textContent = css;
  document.head.appendChild(style);
}"""

INSERT_FRONT_JS = """(markup) => {
  document.getElementById('speclab-front')?.remove();
  document.querySelector('article.bd-article').insertAdjacentHTML('afterbegin', markup);
}"""

FRONT_CSS = """
#speclab-front .speclab-title-page { height: 230mm; display: flex; flex-direction: column; justify-content: center;
  text-align: center; break-after: page; }
#speclab-front .speclab-title { font-size: 2.3em; font-weight: 700; line-height: 1.2; margin: 0 0 1.2em; }
#speclab-front .speclab-abstract { max-width: 34em; margin: 0 auto 2.5em; font-size: 0.95em; }
#speclab-front .speclab-authors { font-size: 1.25em; margin: 0 0 0.6em; }
#speclab-front .speclab-edition { margin: 0 0 0.4em; }
#speclab-front .speclab-url { font-size: 0.85em; }
#speclab-front .speclab-contents { break-after: page; }
#speclab-front .speclab-contents-title { font-size: 1.8em; font-weight: 700; margin: 0 0 0.8em; }
#speclab-front .speclab-toc-part { font-size: 0.8em; font-weight: 700; text-transform: uppercase;
  letter-spacing: 0.06em; margin: 1.1em 0 0.2em; break-after: avoid; }
#speclab-front a.speclab-toc-entry { display: flex; align-items: baseline; color: inherit; text-decoration: none;
  margin: 0.1em 0; break-inside: avoid; }
#speclab-front .speclab-toc-level-0 { font-weight: 600; margin-top: 0.4em; }
#speclab-front .speclab-toc-level-1 { padding-left: 2.2em; font-size: 0.9em; }
#speclab-front .speclab-toc-leader { flex: 1; min-width: 1.5em; margin: 0 0.4em; border-bottom: 1px dotted #888; }
#speclab-front .speclab-toc-page { min-width: 2em; text-align: right; font-variant-numeric: tabular-nums; }
#speclab-front .speclab-toc-targets { position: absolute; width: 1px; height: 1px; overflow: hidden;
  clip-path: inset(50%); }
"""


def contents_rows(root: str, parts: list[tuple[str, list[str]]], headings: list[dict]) -> list[tuple[str, object]]:
    """The printed contents, in _toc.yml's order: ("entry", heading) for the root's and each
    part's chapters and sections, ("part", caption) before each part's."""
    by_doc: dict[str, list[dict]] = {}
    for h in headings:
        by_doc.setdefault(h["doc"], []).append(h)

    def shown(doc: str) -> list[tuple[str, object]]:
        return [("entry", h) for h in by_doc.get(doc, []) if h["level"] <= CONTENTS_DEPTH]

    rows = shown(root)
    for caption, docs in parts:
        if caption:
            rows.append(("part", caption))
        for doc in docs:
            rows += shown(doc)
    return rows


def front_matter_html(citation: Citation, rows: list[tuple[str, object]], pages: dict[str, int],
                      unlisted: list[str]) -> str:
    """The title page and the contents; a page number left out (the first print) keeps its room.
    Chromium writes a named destination only for an element some link of the page leads to: the
    headings too deep for the contents (`unlisted`, ids) get a link each, out of sight."""
    e = html.escape
    out = [f'<div id="speclab-front"><style>{FRONT_CSS}</style>', '<div class="speclab-title-page">',
           f'<p class="speclab-title">{e(citation.title)}</p>']
    if citation.abstract:
        out.append(f'<p class="speclab-abstract">{e(citation.abstract)}</p>')
    out += [f'<p class="speclab-authors">{e(citation.authors_text)}</p>',
            f'<p class="speclab-edition">Version {e(citation.version)}, {e(citation.date_text)}</p>']
    if citation.url:
        out.append(f'<p class="speclab-url">{e(citation.url)}</p>')
    out += ['</div>', '<nav class="speclab-contents" aria-label="Contents">',
            '<p class="speclab-contents-title">Contents</p>']
    for kind, item in rows:
        if kind == "part":
            out.append(f'<p class="speclab-toc-part">{e(item)}</p>')
            continue
        page = pages.get(item["id"])
        out.append(f'<a class="speclab-toc-entry speclab-toc-level-{item["level"]}" href="#{item["id"]}">'
                   f'<span class="speclab-toc-title">{e(item["title"])}</span><span class="speclab-toc-leader"></span>'
                   f'<span class="speclab-toc-page">{page if page else "&nbsp;"}</span></a>')
    out.append('<div class="speclab-toc-targets" aria-hidden="true">'
               + "".join(f'<a href="#{i}" tabindex="-1"></a>' for i in unlisted) + "</div>")
    out.append("</nav></div>")
    return "\n".join(out)


# Chromium's PDF trailer gives a /Size a few objects short of those it writes; pypdf reads them all
# and says so on every read ("Object count ... exceeds defined trailer size ...").
logging.getLogger("pypdf").setLevel(logging.ERROR)


def heading_pages(pdf: Path, ids: list[str]) -> tuple[dict[str, int], dict[str, float]]:
    """The page (from 1) and the height on it of each heading, from the named destinations
    Chromium writes for the targets of the contents' links."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    dests = {str(name).lstrip("/"): dest for name, dest in reader.named_destinations.items()}
    missing = [i for i in ids if i not in dests]
    if missing:
        raise RuntimeError(f"{len(missing)} headings have no destination in {pdf} (first: {missing[:3]})")
    pages = {i: reader.get_destination_page_number(dests[i]) + 1 for i in ids}
    tops = {i: float(dests[i].top) if dests[i].top is not None else None for i in ids}
    return pages, tops


def write_outline(pdf: Path, out: Path, headings: list[dict], pages: dict[str, int], tops: dict[str, float],
                  citation: Citation) -> None:
    """`pdf` with the headings as its bookmarks (chapters at the top, each section under the
    heading above it of a lower level), written to `out`."""
    from pypdf import PdfWriter
    from pypdf.generic import Fit

    writer = PdfWriter(clone_from=pdf)
    open_items: list[tuple[int, object]] = []  # (level, bookmark) of the headings above this one
    for h in headings:
        while open_items and open_items[-1][0] >= h["level"]:
            open_items.pop()
        parent = open_items[-1][1] if open_items else None
        item = writer.add_outline_item(title=h["title"], page_number=pages[h["id"]] - 1, parent=parent,
                                       is_open=False, fit=Fit.xyz(top=tops[h["id"]]))
        open_items.append((h["level"], item))
    writer.page_mode = "/UseOutlines"
    writer.add_metadata({"/Title": citation.title, "/Author": citation.authors_text})
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as f:
        writer.write(f)
    tmp.replace(out)


def print_pdf(singlehtml: Path, out: Path, chromium: str | None = None, timeout_s: float = 300) -> Path:
    chromium = chromium or find_chromium()
    if chromium is None:
        raise RuntimeError("no Chromium found (apt-get install -y chromium)")
    page_file = single_page(singlehtml)
    citation = read_citation()
    out.parent.mkdir(parents=True, exist_ok=True)
    printed = out.with_name(out.name + ".chromium")  # Chromium's print, before the bookmarks
    t0 = time.perf_counter()
    try:
        headings, pages, tops = print_twice(page_file, printed, chromium, timeout_s, citation, read_toc())
        write_outline(printed, out, headings, pages, tops, citation)
    finally:
        printed.unlink(missing_ok=True)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(headings)} bookmarks) "
          f"in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def print_twice(page_file: Path, printed: Path, chromium: str, timeout_s: float, citation: Citation,
                toc) -> tuple[list[dict], dict[str, int], dict[str, float]]:
    """Chromium's print of the book to `printed`, with the front matter, once more than it takes
    the contents' page numbers to settle; the headings, their pages and their heights."""
    from playwright.sync_api import sync_playwright

    root, parts, depth = toc
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = offline_context(browser).new_page()
            page.set_default_timeout(timeout_s * 1000)
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
            page.evaluate("() => MathJax.startup.promise")
            page.evaluate(OPEN_DETAILS_JS)
            page.emulate_media(media="print")
            page.evaluate(ADD_STYLE_JS, PDF_CSS)
            page.evaluate("() => MathJax.typesetPromise ? MathJax.typesetPromise() : null")
            headings = page.evaluate(HEADINGS_JS, [root, depth])
            ids = [h["id"] for h in headings]
            rows = contents_rows(root, parts, headings)
            listed = {item["id"] for kind, item in rows if kind == "entry"}
            unlisted = [i for i in ids if i not in listed]
            pages: dict[str, int] = {}
            for _ in range(MAX_PRINTS):
                page.evaluate(INSERT_FRONT_JS, front_matter_html(citation, rows, pages, unlisted))
                page.pdf(path=str(printed), format="A4", print_background=True, tagged=True, margin=MARGIN,
                         display_header_footer=True, header_template="<span></span>", footer_template=FOOTER)
                found, tops = heading_pages(printed, ids)
                if found == pages:
                    break
                pages = found
            else:
                raise RuntimeError(f"the contents' page numbers still moved after {MAX_PRINTS} prints")
        finally:
            browser.close()
    return headings, pages, tops


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print_pdf(Path(argv[1]), Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
