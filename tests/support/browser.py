"""Open built pages of the book in headless Chromium, offline, and check that the math rendered.

Chromium is driven with Playwright (the `playwright` package, using the machine's Chromium: nothing
is downloaded): `playwright_browser` starts it once, `offline_page` opens a page that can load only
files, `rendered_dom` reads a page's DOM back once MathJax typeset it (the math check below), and the
tests that type into quizzes and measure layout (tests/book/) use the same two.

Used by tests/book/test_rendering.py, and runnable by hand on any built book:

    python tests/support/browser.py _build/html            # every page; exit status 1 on a problem

Each page is loaded from disk with the network cut off (every request that is not for a file is
refused), so MathJax can only come from the build itself. After the
page's scripts ran, Chromium's DOM is read back and two things are checked:

* MathJax produced output: every formula the page holds (Sphinx marks them ``class="math"``)
  became an ``<mjx-container>``, and there is at least one when the page has formulas;
* no raw TeX is left in the visible text: no ``\\(``, ``\\[``, ``$$``, ``$...$`` pair or TeX
  macro such as ``\\alpha`` outside code, scripts and MathJax's own output.
"""

from __future__ import annotations

import re
import shutil
import sys
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# text inside these elements is not prose: code, scripts, and what MathJax wrote itself
SKIP_TAGS = {"script", "style", "pre", "code", "textarea", "mjx-container", "mjx-assistive-mml",
             "math", "svg", "kbd", "samp", "noscript"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
             "track", "wbr"}
RAW_TEX = [
    (re.compile(r"\\\(|\\\)|\\\[|\\\]"), "a TeX delimiter \\( \\) \\[ \\]"),
    (re.compile(r"\$\$"), "a $$ delimiter"),
    (re.compile(r"\$[^$\s][^$]{0,200}?\$"), "a $...$ span"),
    (re.compile(r"\\(?:alpha|beta|frac|sum|min|max|mathbb|text|left|right|le|ge|cdot|infty|operatorname|begin|end|tfrac|dfrac|ln|log|sqrt)\b"),
     "a TeX macro"),
]


# what Chromium needs here: headless as root, no GPU, and no attempt to reach the (closed) network
PLAYWRIGHT_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def playwright_browser(chromium: str | None = None):
    """The machine's Chromium, headless, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    chromium = chromium or find_chromium()
    if chromium is None:
        raise RuntimeError("no Chromium found (apt-get install -y chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=PLAYWRIGHT_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def offline_page(browser, width: int = 1280, height: int = 900):
    """A new page that loads files from disk and has every other request refused."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
    page = context.new_page()
    page.set_default_timeout(60_000)
    return page


def open_page(page, path: Path) -> None:
    """Load a built page and wait until MathJax, where the page loads it, has typeset it."""
    page.goto(path.resolve().as_uri(), wait_until="load")
    if page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')"):
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _Reader(HTMLParser):
    """Counts MathJax output and Sphinx math nodes; collects visible text outside SKIP_TAGS."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.skip_depth = 0
        self.mjx = 0
        self.math_nodes = 0
        self.mathjax_errors = 0
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "mjx-container":
            self.mjx += 1
        if tag == "mjx-merror" or "MathJax_Error" in classes:
            self.mathjax_errors += 1
        if "math" in classes and tag in ("span", "div"):
            self.math_nodes += 1
        if tag in VOID_TAGS:
            return
        self.stack.append(tag)
        if tag in SKIP_TAGS:
            self.skip_depth += 1

    def handle_endtag(self, tag):
        if tag in VOID_TAGS or tag not in self.stack:
            return
        while self.stack:
            top = self.stack.pop()
            if top in SKIP_TAGS:
                self.skip_depth -= 1
            if top == tag:
                break

    def handle_data(self, data):
        if self.skip_depth == 0 and data.strip():
            self.text.append(data)


def rendered_dom(page, path: Path) -> str:
    """The DOM of a built page once its scripts ran and MathJax (when it loaded) typeset it, read back
    through a Playwright page of `offline_page` (every request but a file's refused)."""
    page.goto(path.resolve().as_uri(), wait_until="load")  # the page's scripts, MathJax's too, loaded or failed
    # MathJax.startup exists only once MathJax itself ran (the page's configuration names no startup block)
    if page.evaluate("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"):
        page.evaluate("() => MathJax.startup.promise")  # resolves after the first typesetting pass
    return page.content()


# every display equation, table and code output wider than its own box or than the article column
OVERFLOW = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const column = document.querySelector('article.bd-article') || document.querySelector('main');
  const edge = column.getBoundingClientRect().right;
  const kinds = [['equation', 'mjx-container[display="true"]'], ['table', 'table'], ['output', '.cell_output pre']];
  const found = [];
  for (const [kind, selector] of kinds) {
    for (const el of document.querySelectorAll(selector)) {
      const box = el.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;  // not laid out (e.g. a printed-only copy)
      const hidden = el.scrollWidth - el.clientWidth;
      const beyond = box.right - edge;
      if (hidden > 1 || beyond > 1) {
        found.push(`${kind}: ${Math.round(Math.max(hidden, beyond))} px too wide: `
                   + el.innerText.replace(/\\s+/g, ' ').slice(0, 90));
      }
    }
  }
  return found;
}"""


def overflowing(page) -> list[str]:
    """What on the open page is too wide for the article column, once every collapsed block is open
    (tests/book/test_layout_browser.py)."""
    return page.evaluate(OVERFLOW)


def problems_in(dom: str) -> list[str]:
    """What is wrong with the math of one rendered page (empty when nothing is)."""
    reader = _Reader()
    reader.feed(dom)
    found = []
    if reader.math_nodes and reader.mjx == 0:
        found.append(f"MathJax produced no output for the page's {reader.math_nodes} formulas")
    elif reader.mjx < reader.math_nodes:
        found.append(f"only {reader.mjx} of {reader.math_nodes} formulas were typeset")
    if reader.mathjax_errors:
        found.append(f"{reader.mathjax_errors} MathJax error(s) (bad TeX)")
    text = " ".join(reader.text)
    for pattern, what in RAW_TEX:
        for match in list(pattern.finditer(text))[:3]:
            start = max(0, match.start() - 40)
            found.append(f"raw TeX, {what}: ...{text[start:match.end() + 40]!r}...")
    return found


def check_pages(pages: list[Path], browser) -> dict[str, list[str]]:
    """Map each page to its problems (pages without problems are left out), all opened in one tab of
    `browser` (`playwright_browser`)."""
    report = {}
    tab = offline_page(browser)
    for path in pages:
        problems = problems_in(rendered_dom(tab, path))
        if problems:
            report[str(path)] = problems
    return report


def book_pages(html_root: Path) -> list[Path]:
    """The book's content pages: the front page, the chapters, the notation and lab pages."""
    pages = sorted((html_root / "book").rglob("*.html"))
    return [p for p in pages if "_sources" not in p.parts]


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "_build/html")
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium found (apt-get install -y chromium)", file=sys.stderr)
        return 2
    pages = book_pages(root)
    if not pages:
        print(f"no built pages under {root}", file=sys.stderr)
        return 2
    with playwright_browser(chromium) as browser:
        report = check_pages(pages, browser)
    for page, problems in report.items():
        print(page)
        for problem in problems:
            print("   ", problem)
    print(f"{len(pages)} pages checked, {len(report)} with problems")
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
