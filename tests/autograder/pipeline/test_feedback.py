"""Feedback pages a student can read offline (autograder/pipeline/feedback.py).

A graded Lab 1 notebook is made by hand from the instructor's source (which, like an
autograded notebook, holds the hidden tests) with a failed statistical test cell whose
traceback prints hidden lines; the page must show the points and the grader's notes in a box
at the top, name every test cell by its part and what it checks, and show the failure's
message but neither the hidden lines nor the traceback. In headless Chromium, with the network
cut off, MathJax must typeset every formula (no raw TeX left); the same page without the
inlined MathJax must fail that check, so the check can fail.
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from html import escape, unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.pipeline.feedback import describe_cells, write_feedback

ROOT = Path(__file__).resolve().parents[3]
LAB = "lab1"
FAILED = "test_sampler_exactness"
MESSAGE = "speculative_sample on pair 'reversed': token 2 drawn 0.512 of the time, exact law 0.3 (p-value 1e-9)"
HIDDEN_LINE = "_checks.check_sampler(speculative_sample)"
NOTE = "lab1.ipynb cell abc123: NameError: name 'helper' is not defined"


def _source_nb() -> dict:
    """The instructor's notebook (built from solutions/lab1/lab1.md): it holds the hidden tests, as a graded one does."""
    return json.loads((ROOT / "solutions" / LAB / f"{LAB}.ipynb").read_text())


def _graded(layout: dict) -> tuple[dict, dict]:
    nb = copy.deepcopy(_source_nb())
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == FAILED:
            cell["outputs"] = [{"output_type": "error", "ename": "ExactnessFailure", "evalue": MESSAGE,
                                "traceback": ["\x1b[0;31m---------------------------------------------\x1b[0m",
                                              f"Cell In[7], line 9\n----> 9 {HIDDEN_LINE}",
                                              f"ExactnessFailure: {MESSAGE}"]}]
    scores = {g: (0.0 if g == FAILED else pts) for g, pts in layout.items()}
    result = {"student": "ada", "lab": LAB, "scores": {LAB: scores}, "score": sum(scores.values()),
              "max_score": sum(layout.values()), "problems": [NOTE], "seconds": 1.0, "submission_sha256": "x"}
    return nb, result


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from autograder.checks.lab1 import CELLS

    out = tmp_path_factory.mktemp("out")
    layout = {c.grade_id: float(c.points) for c in CELLS}
    nb, result = _graded(layout)
    (out / "template" / "labs" / LAB).mkdir(parents=True)
    shutil.copyfile(ROOT / "labs" / LAB / f"{LAB}.ipynb", out / "template" / "labs" / LAB / f"{LAB}.ipynb")
    graded = out / "autograded" / "ada" / LAB / f"{LAB}.ipynb"
    graded.parent.mkdir(parents=True)
    graded.write_text(json.dumps(nb))
    assert write_feedback(out, ROOT, LAB, {LAB: layout}, [result], progress=False) == 1
    html = out / "feedback" / "ada" / LAB / f"{LAB}.html"
    return out, layout, result, html


def test_box_at_the_top_with_points_and_notes(page):
    _, layout, result, html = page
    text = html.read_text()
    box = text.index('id="speclab-summary"')
    first_cell = text.index("Lab 1")
    assert box < first_cell
    assert f"{result['score']:g} / {result['max_score']:g} points" in text
    assert "Notes from the grader" in text and "name 'helper' is not defined" in unescape(text)


def test_every_test_cell_is_named_by_part_and_check(page):
    _, layout, _, html = page
    text = html.read_text()
    release = json.loads((ROOT / "labs" / LAB / f"{LAB}.ipynb").read_text())
    names = describe_cells(ROOT, LAB, release)
    assert list(names) == list(layout)  # the lab's order, every test cell
    for gid, (part, what) in names.items():
        assert re.match(r"Part \d+: ", part), (gid, part)
        assert what and what != gid.removeprefix("test_").replace("_", " "), (gid, what)  # from the check's docstring
        assert f'id="{gid}"' in text
    assert text.count('class="speclab-test') == len(layout)
    assert "Test cell" not in text  # nbgrader's unnamed lines


def test_hidden_tests_and_tracebacks_are_not_shown(page):
    _, layout, _, html = page
    text = html.read_text()
    assert "BEGIN HIDDEN TESTS" not in text and "END HIDDEN TESTS" not in text
    assert "check_sampler" not in text and "_checks" not in text and "autograder.checks" not in text
    assert "Cell In[7]" not in text
    assert MESSAGE in unescape(text)  # the verdict and its message are there
    assert f"0 / {layout[FAILED]:g} points" in text


def test_page_needs_no_network(page):
    _, _, _, html = page
    text = html.read_text()
    assert "window.MathJax" in text
    assert not re.search(r"<script[^>]+src=\"https?://", text), "a script from the network"
    assert not re.search(r"<link[^>]+href=\"https?://", text), "a stylesheet from the network"


def test_unchanged_pages_are_not_written_again(page):
    out, layout, result, html = page
    before = html.stat().st_mtime_ns
    assert write_feedback(out, ROOT, LAB, {LAB: layout}, [result], progress=False) == 0
    assert html.stat().st_mtime_ns == before
    changed = dict(result, problems=result["problems"] + ["lab1.ipynb: regraded by hand"])
    assert write_feedback(out, ROOT, LAB, {LAB: layout}, [changed], progress=False) == 1


# ----------------------------------------------------------------------------- messages and timings
# A two-cell lab written here (fast, and independent of the course's labs): part 1's sampler check
# also runs a contract check (two rules); part 2's timed check is the one whose timing can be undecided.
FB = "fb"
FB_CHECKS = """
def check_contract(sample):
    \"\"\"Same seed, same draws; the global generator untouched.\"\"\"


def check_sampler(sample):
    \"\"\"Draws follow p exactly on every pair.

    (a paragraph for the instructor, not a rule)\"\"\"
    check_contract(sample)


def check_speed(sample):
    \"\"\"At least 3 times faster than a Python loop.\"\"\"
"""
# a message as the distance test writes it: a first sentence, then the detail a student needs
# (with characters that must be escaped, and that would be markup if they were not)
FB_MESSAGE = ("ExactnessFailure: [reversed] your samples do not follow the target distribution: the total "
              "variation is 0.1234, a correct implementation stays below 0.0456. Largest differences: "
              + "; ".join(f"token {i} <b>&amp;</b>: 0.{i:04d} of your samples, expected 0.0100" for i in range(90)))
FB_UNDECIDED = "no clear verdict after 22 paired rounds (median 2.9x against the 3x bar)"


def _fb_notebook(outputs: bool) -> dict:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    def test(gid, check, pts):
        src = f"### BEGIN HIDDEN TESTS\nfrom autograder.checks import {FB} as _checks\n_checks.{check}(sample)\n### END HIDDEN TESTS"
        cell = new_code_cell(src, metadata={"nbgrader": {"grade": True, "solution": False, "locked": True,
                                                         "grade_id": gid, "points": pts}})
        if outputs:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                   text=f"{check}: run by the grader outside this notebook\n")]
        return cell

    nb = new_notebook(cells=[
        new_markdown_cell("# A lab\n## Part 1: Sampling (4 points)"),
        new_code_cell("def sample(p, q, rng):\n    return 0", metadata={"nbgrader": {
            "grade": False, "solution": True, "locked": False, "grade_id": "sample"}}),
        test("test_sampler", "check_sampler", 4),
        new_markdown_cell("## Part 2: Speed (1 point)"),
        test("test_speed", "check_speed", 1)])
    return json.loads(nbformat.writes(nb))


@pytest.fixture(scope="module")
def fb_pages(tmp_path_factory):
    """Pages of three students: bea fails part 1 with a long message and part 2's timing was undecided;
    cal passes everything, every timing clear; dan fails part 1 with a message past the cap."""
    from autograder.inside.recheck import MESSAGE_CAP
    from autograder.pipeline.results import lower_of, timing_notes

    course, out = tmp_path_factory.mktemp("course"), tmp_path_factory.mktemp("out")
    (course / "autograder" / "checks").mkdir(parents=True)
    (course / "autograder" / "checks" / f"{FB}.py").write_text(FB_CHECKS)
    (course / "solutions" / FB).mkdir(parents=True)
    (course / "solutions" / FB / f"{FB}.ipynb").write_text(json.dumps(_fb_notebook(False)))
    (out / "template" / "labs" / FB).mkdir(parents=True)
    (out / "template" / "labs" / FB / f"{FB}.ipynb").write_text(json.dumps(_fb_notebook(False)))
    layout = {FB: {"test_sampler": 4.0, "test_speed": 1.0}}
    huge = "AssertionError: " + "z" * (MESSAGE_CAP + 777)
    results = []
    for student, message, undecided in (("bea", FB_MESSAGE, {"test_speed": [FB_UNDECIDED]}), ("cal", "", {}),
                                        ("dan", huge, {})):
        scores, notes = lower_of(FB, {"test_sampler": 4.0, "test_speed": 1.0},
                                 {"test_sampler": (not message, message), "test_speed": (True, "")},
                                 judged={"test_sampler", "test_speed"}, deferred={"test_sampler", "test_speed"})
        results.append({"student": student, "lab": FB, "scores": {FB: scores}, "score": sum(scores.values()),
                        "max_score": 5.0, "problems": notes + timing_notes(FB, undecided),
                        "timing": {FB: undecided} if undecided else {}, "seconds": 1.0, "submission_sha256": student})
        graded = out / "autograded" / student / FB / f"{FB}.ipynb"
        graded.parent.mkdir(parents=True)
        graded.write_text(json.dumps(_fb_notebook(True)))
    assert write_feedback(out, course, FB, layout, results, progress=False) == 3
    return {s: (out / "feedback" / s / FB / f"{FB}.html").read_text() for s in ("bea", "cal", "dan")}, huge


def _block(page: str, start: str, end: str = "</div></div>") -> str:
    """The page's HTML from `start` to the first `end` after it."""
    at = page.index(start)
    return page[at:page.index(end, at)]


def test_a_long_message_reaches_the_page_whole_its_detail_folded(fb_pages):
    pages, _ = fb_pages
    cell = _block(pages["bea"], 'id="test_sampler"')
    shown, folded = cell.split("<details>", 1)
    first = ("ExactnessFailure: [reversed] your samples do not follow the target distribution: the total variation "
             "is 0.1234, a correct implementation stays below 0.0456.")
    assert escape(first) in shown and "Largest differences" not in shown  # the verdict in view, the detail folded
    folded = re.sub(r"<summary>.*?</summary>", "", folded, flags=re.S).split("</details>")[0]
    assert unescape(folded) == FB_MESSAGE[len(first):].lstrip()  # every character of the rest, none dropped
    assert "token 89 <b>&amp;</b>: 0.0089" in unescape(folded)
    assert "<b>&amp;</b>" not in pages["bea"]  # escaped, never markup
    assert "0 / 4 points" in cell


def test_a_message_past_the_cap_says_how_much_was_cut(fb_pages):
    pages, huge = fb_pages
    from autograder.inside.recheck import MESSAGE_CAP

    for where in (_block(pages["dan"], 'id="grader-notes"', "</ul>"), _block(pages["dan"], 'id="test_sampler"')):
        assert "z" * (MESSAGE_CAP - len("AssertionError: ")) in where  # the cap's worth, whole
        assert "z" * (MESSAGE_CAP - len("AssertionError: ") + 1) not in where  # not one more
        assert f"[... cut: {len(huge) - MESSAGE_CAP} more characters]" in where.split("<details>", 1)[1]


def test_what_is_checked_names_every_rule_of_a_cell(fb_pages):
    pages, _ = fb_pages
    row = _block(pages["cal"], 'href="#test_sampler"', "</tr>")
    assert "Draws follow p exactly on every pair." in row and "Same seed, same draws" in row
    assert "for the instructor" not in row  # the docstring's first paragraph only
    assert "At least 3 times faster" in _block(pages["cal"], 'href="#test_speed"', "</tr>")


def test_an_undecided_timing_is_in_its_row_its_cell_and_the_notes(fb_pages):
    pages, _ = fb_pages
    page = pages["bea"]
    row = _block(page, 'href="#test_speed"', "</tr>")
    assert "timing undecided:" in row and escape(FB_UNDECIDED) in row and "1 / 1" in row
    assert escape(FB_UNDECIDED) in _block(page, 'id="grader-notes"', "</ul>")
    assert escape(FB_UNDECIDED) in _block(page, 'id="test_speed"')
    assert escape(FB_UNDECIDED) not in _block(page, 'href="#test_sampler"', "</tr>")  # only in its own row


def test_clear_timings_leave_no_timing_note(fb_pages):
    pages, _ = fb_pages
    assert "timing undecided" not in pages["cal"] and 'class="speclab-timing"' not in pages["cal"]
    assert 'id="grader-notes"' not in pages["cal"]


# ----------------------------------------------------------------------------- in a browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium)")
SKIP = {"script", "style", "pre", "code", "mjx-container", "svg", "math", "textarea"}
VOID = {"br", "hr", "img", "input", "link", "meta", "col", "area", "base", "embed", "source", "track", "wbr"}
RAW_TEX = re.compile(r"\\\(|\\\[|\$\$|\$[^$\s][^$]{0,200}?\$|\\(?:alpha|frac|sum|min|max|left|right|text|le|ge)\b")


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.skip, self.text, self.mjx, self.errors = [], 0, [], 0, 0

    def handle_starttag(self, tag, attrs):
        self.mjx += tag == "mjx-container"
        self.errors += tag == "mjx-merror"
        if tag in VOID:
            return
        self.stack.append(tag)
        self.skip += tag in SKIP

    def handle_endtag(self, tag):
        if tag in VOID or tag not in self.stack:
            return
        while self.stack:
            top = self.stack.pop()
            self.skip -= top in SKIP
            if top == tag:
                break

    def handle_data(self, data):
        if not self.skip:
            self.text.append(data)


def rendered(path: Path) -> _Text:
    """The page's DOM after its scripts ran, in headless Chromium with every host unreachable."""
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
                           "--proxy-server=http://127.0.0.1:9", "--virtual-time-budget=30000",
                           "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert "<html" in proc.stdout, proc.stderr[-2000:]
    reader = _Text()
    reader.feed(proc.stdout)
    return reader


@pytest.mark.slow
@needs_chromium
def test_math_is_typeset_offline_in_chromium(page, tmp_path):
    _, _, _, html = page
    release = json.loads((ROOT / "labs" / LAB / f"{LAB}.ipynb").read_text())
    formulas = sum(len(RAW_TEX.findall("".join(c["source"]))) for c in release["cells"] if c["cell_type"] == "markdown")
    assert formulas > 10, "the lab has math to render"
    dom = rendered(html)
    left = RAW_TEX.findall(" ".join(dom.text))
    assert not left, f"raw TeX left on the page: {left[:5]}"
    assert dom.mjx >= formulas // 2 and dom.errors == 0, (dom.mjx, formulas, dom.errors)
    # the check can fail: the same page without its MathJax leaves the TeX raw
    stripped = tmp_path / "no-mathjax.html"
    stripped.write_text(re.sub(r"<script[^>]*>window\.MathJax.*?</script>\s*<script[^>]*>.*?</script>", "", html.read_text(),
                               count=1, flags=re.S))
    bare = rendered(stripped)
    assert bare.mjx == 0 and RAW_TEX.findall(" ".join(bare.text))


def test_a_page_that_cannot_be_drawn_gets_a_short_page_and_the_others_are_written(tmp_path, monkeypatch):
    """One notebook the renderer chokes on costs its student the detailed page only (a short page says the
    score and why), never the class's feedback; the next run tries that page again."""
    from autograder.checks.lab1 import CELLS
    from autograder.pipeline import feedback

    layout = {c.grade_id: float(c.points) for c in CELLS}
    nb, result = _graded(layout)
    (tmp_path / "template" / "labs" / LAB).mkdir(parents=True)
    shutil.copyfile(ROOT / "labs" / LAB / f"{LAB}.ipynb", tmp_path / "template" / "labs" / LAB / f"{LAB}.ipynb")
    results = []
    for student in ("ann", "bob", "cid"):
        graded = tmp_path / "autograded" / student / LAB / f"{LAB}.ipynb"
        graded.parent.mkdir(parents=True)
        graded.write_text(json.dumps(nb))
        results.append({**result, "student": student, "submission_sha256": student})
    real = feedback.render_page

    def choke_on_bob(renderer, course, lab, nb_name, r, *args):
        if r["student"] == "bob":
            raise TypeError("sequence item 3: expected str instance, int found")
        return real(renderer, course, lab, nb_name, r, *args)

    monkeypatch.setattr(feedback, "render_page", choke_on_bob)
    assert write_feedback(tmp_path, ROOT, LAB, {LAB: layout}, results, progress=False) == 3
    pages = {s: (tmp_path / "feedback" / s / LAB / f"{LAB}.html").read_text() for s in ("ann", "bob", "cid")}
    assert "could not be drawn (TypeError" in pages["bob"] and f"{result['score']:g} of 20 points" in pages["bob"]
    assert "could not be drawn" not in pages["ann"] and "could not be drawn" not in pages["cid"]
    monkeypatch.setattr(feedback, "render_page", real)
    assert write_feedback(tmp_path, ROOT, LAB, {LAB: layout}, results, progress=False) == 1  # bob's, again


def test_a_cell_nbgrader_cannot_read_is_made_readable():
    from autograder.pipeline import normalise

    release = _source_nb()
    student = copy.deepcopy(release)
    student["cells"].insert(1, {"cell_type": "markdown", "id": "mine", "metadata": {}, "source": ["# notes\n", 3]})
    student["cells"].insert(2, {"cell_type": "heading", "id": "old", "metadata": {}, "source": None})
    fixed, lines = normalise(student, release)
    sources = {c["id"]: c for c in fixed["cells"]}
    assert sources["mine"]["source"] == "# notes\n3" and sources["old"]["cell_type"] == "raw"
    assert sum("could not read" in line for line in lines) == 2
    import nbformat

    nbformat.validate(nbformat.from_dict(fixed))  # what nbgrader reads


def test_a_page_larger_than_a_page_may_take_is_the_score_page_and_says_so(tmp_path):
    """Issue 49: a notebook whose outputs are huge (here 9 MB of printed text) would make a page of that size
    in OUT; over Limits.kept_mb it is replaced by the score-only page, which says why. A usual page beside it
    (about 3 MB, MathJax inlined) is drawn whole."""
    from autograder.checks.lab1 import CELLS

    layout = {c.grade_id: float(c.points) for c in CELLS}
    nb, result = _graded(layout)
    big = copy.deepcopy(nb)
    code = next(c for c in big["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "0123456789abcdef\n" * (1 << 19)}]
    (tmp_path / "template" / "labs" / LAB).mkdir(parents=True)
    shutil.copyfile(ROOT / "labs" / LAB / f"{LAB}.ipynb", tmp_path / "template" / "labs" / LAB / f"{LAB}.ipynb")
    results = []
    for student, notebook in (("ann", big), ("bob", nb)):
        graded = tmp_path / "autograded" / student / LAB / f"{LAB}.ipynb"
        graded.parent.mkdir(parents=True)
        graded.write_text(json.dumps(notebook))
        results.append({**result, "student": student, "submission_sha256": student})
    assert write_feedback(tmp_path, ROOT, LAB, {LAB: layout}, results, progress=False, kept_mb=5) == 2
    pages = {s: tmp_path / "feedback" / s / LAB / f"{LAB}.html" for s in ("ann", "bob")}
    assert pages["ann"].stat().st_size < 10_000 and "more than the 5 MB a page may take" in pages["ann"].read_text()
    assert f"{result['score']:g} of 20 points" in pages["ann"].read_text()
    assert "could not be drawn" not in pages["bob"].read_text() and pages["bob"].stat().st_size > 10_000
