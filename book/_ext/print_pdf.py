"""Print the book's single-page HTML to one PDF, offline, in headless Chromium.

    python book/_ext/print_pdf.py _build/singlehtml _build/html/speclab.pdf

`make pdf` first builds the single-page HTML (``jupyter-book build . --builder singlehtml``,
which reuses the execution cache of `make book`: nothing is executed twice), then runs this.
The page is opened with every request off the machine refused, MathJax (served from the build
itself) is waited for, every ``<details>`` is opened (the quizzes' text copies with their
answers, the exercises' solutions, collapsed code), and Chromium prints it to A4 (the
stylesheet `_static/speclab.css` hides the interactive quizzes and the page chrome in print).

Jupyter Book writes the single page at ``<dir>/book/intro.html`` (the root document) but with
links written as if it sat at ``<dir>/``, and sphinx-mathjax-offline points the MathJax script
one folder too deep; the page is therefore copied to ``<dir>/speclab-book.html`` first, where
every link resolves.

Chromium: Debian's `chromium` (/usr/bin/chromium), driven by Playwright (the `playwright` package;
no browser is downloaded).
"""
from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# the flags this machine's Chromium needs headless, as root, with no network
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


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


def print_pdf(singlehtml: Path, out: Path, chromium: str | None = None, timeout_s: float = 300) -> Path:
    from playwright.sync_api import sync_playwright

    chromium = chromium or find_chromium()
    if chromium is None:
        raise RuntimeError("no Chromium found (apt-get install -y chromium)")
    page_file = single_page(singlehtml)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = offline_context(browser).new_page()
            page.set_default_timeout(timeout_s * 1000)
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
            page.evaluate("() => MathJax.startup.promise")
            page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
            page.emulate_media(media="print")
            page.evaluate("() => MathJax.typesetPromise ? MathJax.typesetPromise() : null")
            page.pdf(path=str(out), format="A4", print_background=True, outline=True, tagged=True,
                     margin={"top": "15mm", "bottom": "15mm", "left": "14mm", "right": "14mm"},
                     display_header_footer=True, header_template="<span></span>",
                     footer_template='<div style="font-size:8px;width:100%;text-align:center">'
                                     '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
        finally:
            browser.close()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print_pdf(Path(argv[1]), Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
