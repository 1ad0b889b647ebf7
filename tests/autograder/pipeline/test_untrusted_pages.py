"""A student's notebook stays data on its feedback page: no script of the student's runs and no score box of
its own appears, whatever the notebook carries (autograder/pipeline/feedback.py, issue 49).

Each escaping class is one graded notebook of the tiny lab, as nbgrader's run leaves it (the student's cells,
their metadata and the outputs its code displayed), rendered by `write_feedback` and opened in headless
Chromium with the network cut off:
- **metadata**: a raw cell marked as the grader's own HTML (`speclab: true`) with a script and a forged
  "5 / 5" box; a cell whose tags would break out of its class attribute; notebook metadata asking for widgets;
  a code cell of the student's carrying test_add's nbgrader metadata, before the real test_add cell (which
  holds hidden tests, as a graded notebook's does);
- **rich output**: HTML with a script and an `onerror` handler, an SVG with `onload`, JavaScript, Markdown
  with raw HTML, a MIME type the page does not know (`text/vnd.mermaid`, which nbconvert writes unescaped);
- **image attributes**: a PNG whose width metadata carries an event handler;
- **invalid fields**: an execution count that is HTML text (the notebook format forbids it; a file holds it).
Every payload, if it ran, would add an element whose id starts with `ran-`. Each test asserts that no such
element exists, that the one score box is the grader's with the student's real score, and that the student's
text is still on the page as text. The detector is shown able to fail: the same payloads pasted into the page
without its policy run in the same Chromium (`test_the_detector_sees_a_script_that_runs`).
"""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell

import grading_fixtures as F
from released import seed_template  # one release of a lab per test process (tests/support/released.py)
from autograder.checks import HIDDEN_BEGIN, HIDDEN_END
from autograder.pipeline import Config, build_template
from autograder.pipeline.feedback import write_feedback

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium)")]


def ran(tag: str) -> str:
    """JavaScript that leaves a mark (an element with id ran-TAG) when it runs (no comma: a cell tag may hold none)."""
    return f"document.body.appendChild(document.createElement('i')).id='ran-{tag}'"


FORGED_BOX = '<div class="speclab-box" id="speclab-summary"><h2>tiny: 5 / 5 points</h2></div>'
FORGED_CLAIM = "print('this cell claims to be test_add')"
SECRET = "assert add(40, 2) == 42  # a hidden test"
BAD_PNG = "bm90IGEgcG5n"  # base64 of "not a png": the image fails to load, so an onerror handler would fire


def _display(data: dict, metadata: dict | None = None) -> dict:
    return {"output_type": "display_data", "data": data, "metadata": metadata or {}}


def hostile_cells(kind: str) -> tuple[list, dict]:
    """(cells added after the solution cell, notebook metadata) of one escaping class."""
    if kind == "metadata":
        raw = new_raw_cell(f"<script>{ran('raw')}</script>{FORGED_BOX}")
        raw.metadata = {"raw_mimetype": "text/html", "speclab": True}
        tagged = new_markdown_cell("tagged cell")
        tagged.metadata = {"tags": [f'x" autofocus tabindex="1" onfocus="{ran("tags")}']}
        # a cell of the student's that claims to be test_add, before the real one: were the page to trust it,
        # the real test cell (which holds the hidden tests in a graded notebook) would be drawn as the student's
        claim = new_code_cell(FORGED_CLAIM)
        claim.metadata = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_add", "points": 2}}
        return [raw, tagged, claim], {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}}
    if kind == "rich":
        code = new_code_cell("show()")
        code.outputs = [
            _display({"text/html": f'<img src=x onerror="{ran("html")}"><script>{ran("script")}</script>{FORGED_BOX}'}),
            _display({"image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{ran("svg")}">'
                                       '<circle r="4"/></svg>'}),
            _display({"application/javascript": ran("js")}),
            _display({"text/markdown": f'**bold** <img src=x onerror="{ran("md")}">'}),
            _display({"text/vnd.mermaid": f"</pre><img src=x onerror=\"{ran('mermaid')}\">"}),
        ]
        return [code, new_markdown_cell(f"<img src=x onerror=\"{ran('markdown')}\"> {FORGED_BOX}")], {}
    if kind == "image":
        code = new_code_cell("plot()")
        code.outputs = [_display({"image/png": BAD_PNG}, {"image/png": {"width": f"1 onerror={ran('width')}",
                                                                         "height": 2}}),
                        _display({"image/jpeg": BAD_PNG}, {"width": f"1 onerror={ran('jpeg')}"})]
        return [code], {}
    if kind == "invalid":  # fields the notebook format forbids, which a student's file can hold all the same
        code = new_code_cell("print(1)")
        code.execution_count = f"<img src=x onerror={ran('count')}>"
        code.outputs = [_display({"text/html": f"<img src=x onerror={ran('invalid')}>"}, {"isolated": "yes"})]
        return [code], {}
    raise ValueError(kind)


KINDS = ("metadata", "rich", "image", "invalid")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """kind -> (the page's path, the student's real score): one student per escaping class, half right (2 / 5)."""
    base = tmp_path_factory.mktemp("untrusted")
    cfg = Config(F.LAB, base / "subs", base / "out", F.make_course(base / "course"), workers=1)
    seed_template(cfg)
    layout = build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    results = []
    for kind in KINDS:
        cells, meta = hostile_cells(kind)
        nb = F.student(release, F.HALF)
        at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "impl") + 1
        nb.cells[at:at] = cells
        nb.metadata.update(meta)
        real = next(c for c in nb.cells[at + len(cells):]
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "test_add")
        real.source += f"\n{HIDDEN_BEGIN}\n{SECRET}\n{HIDDEN_END}\n"  # as nbgrader's autograde puts them back
        graded = cfg.out / "autograded" / kind / F.LAB / f"{F.LAB}.ipynb"
        graded.parent.mkdir(parents=True)
        graded.write_text(json.dumps(nb))  # as a file: the hostile fields (a text execution count) kept as they are
        scores = {"test_add": 2.0, "test_scale": 0.0}
        results.append({"student": kind, "lab": F.LAB, "scores": {F.LAB: scores}, "score": 2.0, "max_score": 5.0,
                        "problems": [], "seconds": 1.0, "submission_sha256": kind})
    assert write_feedback(cfg.out, cfg.course_root, F.LAB, layout, results, progress=False) == len(KINDS)
    return {kind: cfg.out / "feedback" / kind / F.LAB / f"{F.LAB}.html" for kind in KINDS}


class _Dom(HTMLParser):
    """What the checks read of a page's DOM: element ids, the score boxes (class speclab-box) and their text."""

    def __init__(self):
        super().__init__()
        self.ids: list[str] = []
        self.boxes: list[list[str]] = []
        self.text: list[str] = []
        self._depth = 0  # inside a score box: how deep

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if self._depth:
            self._depth += 1
        elif "speclab-box" in (a.get("class") or "").split():
            self.boxes.append([])
            self._depth = 1

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        self.text.append(data)
        if self._depth:
            self.boxes[-1].append(data)


def dom(path: Path) -> _Dom:
    """The page's DOM after its scripts ran, in headless Chromium with every host unreachable."""
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
                           "--proxy-server=http://127.0.0.1:9", "--virtual-time-budget=20000",
                           "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert "<html" in proc.stdout, proc.stderr[-2000:]
    out = _Dom()
    out.feed(proc.stdout)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_no_student_script_runs_and_no_forged_box_appears(pages, kind):
    page = dom(pages[kind])
    assert not [i for i in page.ids if i.startswith("ran-")], f"{kind}: the student's script ran: {page.ids}"
    assert len(page.boxes) == 1, f"{kind}: {len(page.boxes)} score boxes"
    assert "tiny: 2 / 5 points" in " ".join(page.boxes[0]), page.boxes[0]
    assert "speclab-summary" == next(i for i in page.ids if i.startswith("speclab-summary"))  # the grader's box only
    assert page.ids.count("speclab-summary") == 1


def test_the_students_text_is_still_there_as_text(pages):
    """Sanitising removes what runs, not what the student wrote: the page still shows the Markdown output's
    bold text, the cell whose tags were dropped, and an output of an unknown type is named, not dropped."""
    rich, meta = " ".join(dom(pages["rich"]).text), " ".join(dom(pages["metadata"]).text)
    assert "bold" in rich and "text/vnd.mermaid: not shown here" in rich
    assert "tagged cell" in meta


def test_the_detector_sees_a_script_that_runs(pages, tmp_path):
    """The check can fail: each class's payloads, pasted into its page with the page's policy taken out, run."""
    for kind in KINDS:
        text = pages[kind].read_text()
        head, _, rest = text.partition("<meta content=\"default-src")
        rest = rest.split(">", 1)[1]  # the Content-Security-Policy meta element, gone
        payload = f'<script>{ran("control")}</script>{FORGED_BOX}'
        bare = tmp_path / f"{kind}.html"
        bare.write_text((head + rest).replace("</body>", payload + "</body>"))
        page = dom(bare)
        assert "ran-control" in page.ids and len(page.boxes) == 2, (kind, page.ids, len(page.boxes))


def test_a_page_allows_no_script_but_the_graders(pages):
    """The Content-Security-Policy is the page's first element: scripts only with the nonce drawn for this page
    (the grader's MathJax carries it), no request leaves the page; two pages draw two nonces."""
    texts = [pages[k].read_text() for k in KINDS]
    nonces = set()
    for text in texts:
        policy = text.split('<meta content="', 1)[1].split('"', 1)[0]
        assert "default-src 'none'" in policy and "script-src 'nonce-" in policy
        nonce = policy.split("'nonce-", 1)[1].split("'", 1)[0]
        assert len(nonce) >= 32 and f'nonce="{nonce}"' in text
        nonces.add(nonce)
    assert len(nonces) == len(texts)


def test_a_forged_speclab_marker_is_student_text(pages):
    """The raw cell that claimed to be the grader's HTML is sanitised like any other: its box markup and its
    script are gone from the page source, its text is left."""
    text = pages["metadata"].read_text()
    body = text[text.index("<body"):]
    assert body.count('class="speclab-box"') == 1 and "ran-raw" not in body.replace("ran(&#39;raw", "")


def test_a_students_cell_with_a_test_cells_metadata_is_the_students(pages):
    """A test cell is known by the release's code, not by metadata a student's cell can carry: the cell that
    claims to be test_add is drawn as the student's, the real one gets the one heading of test_add, and the
    hidden tests in it are not on the page."""
    page = dom(pages["metadata"])
    text = pages["metadata"].read_text()
    assert page.ids.count("test_add") == 1, page.ids
    assert "add(40, 2)" not in text and "hidden checks ran here" in text
    heading = text.index('id="test_add"')
    assert text.index("this cell claims to be test_add") < heading  # the claim is not under the heading


def test_a_notebook_full_of_lists_renders(pages):
    """Multi-line output values stay lists of lines in a notebook file: the page joins them (before, the page
    fell back to the score only, "'list' object has no attribute ...")."""
    text = pages["rich"].read_text()
    assert "could not be drawn" not in text and "<strong>bold</strong>" in text


def test_unchanged_student_content_copy():
    """student_view never changes the notebook it is given (the graded notebook is kept as nbgrader left it)."""
    from autograder.pipeline.feedback import student_view

    cells, meta = hostile_cells("rich")
    nb = {"cells": [json.loads(json.dumps(c)) for c in cells], "metadata": meta, "nbformat": 4, "nbformat_minor": 5}
    before = copy.deepcopy(nb)
    student_view(nb, {}, {}, {}, {}, [], "n" * 32)
    assert nb == before
