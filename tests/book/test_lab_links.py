"""Labs and chapters point at each other, and say the same thing wherever they say it.

A lab's first cell (grade id `intro` of solutions/<lab>/<lab>.md, what a student reads first)
states how long the lab takes (`**Time needed:** about N hours`) and the chapters it needs
(`**Chapters needed:**` followed by links to the published chapters). From those two lines:

- every chapter a lab needs links back to the lab's page in the book ({doc}`Lab 1 <labs/lab1>`,
  the book's own style for its pages; the labs are pages of the book, see _toc.yml);
- the lab's page in the book (book/labs/<lab>.md) states the same time, and the table of
  book/labs/index.md lists the same chapters;
- the book's introduction places each lab after the last chapter it needs ("Lab 1 fits after
  chapter 5"), not earlier.

Each rule is a function returning the problems it finds, so the tests below also feed it
synthetic pages that break the rule and check that it says so.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
LABS = sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.md") if p.stem == p.parent.name)
BASEURL = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["baseurl"].rstrip("/")

TIME = re.compile(r"\*\*Time needed:\*\*\s+about\s+(\d+(?:\.\d+)?\s+hours?(?:\s+\(\d+ to \d+\))?)")
CHAPTER_URL = re.compile(re.escape(BASEURL) + r"/book/(\d\d_[a-z0-9_]+)\.html")
PLACED = re.compile(r"Lab (\d+)(?: fits)? after chapter (\d+)")


def intro_cell(lab: str) -> str:
    """The source of the lab's first cell, grade id `intro`."""
    nb = jupytext.read(ROOT / "solutions" / lab / f"{lab}.md")
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "intro":
            return cell.source
    raise AssertionError(f"solutions/{lab}/{lab}.md has no cell with grade id 'intro'")


def stated_time(intro: str) -> str | None:
    """'3 hours (2 to 4)' from '**Time needed:** about 3 hours (2 to 4)', or None."""
    m = TIME.search(intro)
    return " ".join(m.group(1).split()) if m else None


def needed_chapters(intro: str) -> list[str]:
    """The chapters (file stems) linked in the paragraph that opens with **Chapters needed:**."""
    start = intro.find("**Chapters needed:**")
    if start < 0:
        return []
    paragraph = re.split(r"\n\s*\n", intro[start:], maxsplit=1)[0]
    return CHAPTER_URL.findall(paragraph)


def links_to_lab(page: str, lab: str) -> bool:
    """Does a chapter's MyST source link to the lab's page ({doc}`...<labs/lab>` or {doc}`labs/lab`)?"""
    return re.search(r"\{doc\}`(?:[^`<]*<)?labs/" + re.escape(lab) + r">?`", page) is not None


def intro_problems(lab: str, intro: str, chapters: dict[str, str]) -> list[str]:
    """What the lab's first cell fails to state; chapters: stem -> MyST source of each chapter."""
    problems = []
    if stated_time(intro) is None:
        problems.append(f"{lab}: the first cell does not state the time needed ('**Time needed:** about N hours')")
    needed = needed_chapters(intro)
    if not needed:
        problems.append(f"{lab}: the first cell names no chapter it needs ('**Chapters needed:**' and links "
                        f"to {BASEURL}/book/<chapter>.html)")
    problems += [f"{lab}: needs chapter {stem}, which is not in book/" for stem in needed if stem not in chapters]
    return problems


def backlink_problems(lab: str, intro: str, chapters: dict[str, str]) -> list[str]:
    """Chapters the lab needs that do not link to the lab's page."""
    return [f"book/{stem}.md: {lab} needs this chapter, but the chapter does not link to {{doc}}`labs/{lab}`"
            for stem in needed_chapters(intro) if stem in chapters and not links_to_lab(chapters[stem], lab)]


def placement_problems(intro_page: str, needs: dict[str, list[str]]) -> list[str]:
    """The book's introduction must place each lab after the last chapter it needs."""
    placed = {f"lab{n}": int(ch) for n, ch in PLACED.findall(intro_page)}
    problems = []
    for lab, stems in needs.items():
        last = max(int(s[:2]) for s in stems) if stems else 0
        if lab not in placed:
            problems.append(f"book/intro.md does not say where {lab} fits ('Lab N fits after chapter M')")
        elif placed[lab] < last:
            problems.append(f"book/intro.md places {lab} after chapter {placed[lab]}, but it needs chapter {last}")
    return problems


def book_page_problems(lab: str, intro: str, page: str, index: str) -> list[str]:
    """The lab's page in the book and the labs' index must agree with the lab's first cell."""
    problems = []
    if stated_time(page) != stated_time(intro):
        problems.append(f"{lab}: the book's page says {stated_time(page)!r}, the notebook {stated_time(intro)!r}")
    row = next((ln for ln in index.splitlines() if re.match(r"\|\s*\{doc\}`[^`]*<" + re.escape(lab) + ">`", ln)), "")
    listed = sorted(re.findall(r"\{doc\}`[^`]*<\.\./(\d\d_[a-z0-9_]+)>`", row))
    if listed != sorted(needed_chapters(intro)):
        problems.append(f"{lab}: book/labs/index.md lists chapters {listed}, the notebook needs "
                        f"{sorted(needed_chapters(intro))}")
    return problems


def chapters() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(BOOK.glob("[0-9][0-9]_*.md"))}


# ------------------------------------------------------------------------------ the course


def test_there_are_labs_and_the_book_holds_their_pages():
    assert LABS == ["lab1", "lab2"], LABS
    toc = (ROOT / "_toc.yml").read_text()
    for lab in LABS:
        assert f"book/labs/{lab}" in toc, f"{lab} is not a page of the book (_toc.yml)"


@pytest.mark.parametrize("lab", LABS)
def test_lab_states_its_time_and_the_chapters_it_needs(lab):
    assert intro_problems(lab, intro_cell(lab), chapters()) == []


@pytest.mark.parametrize("lab", LABS)
def test_every_chapter_a_lab_needs_links_to_the_lab(lab):
    assert backlink_problems(lab, intro_cell(lab), chapters()) == []


@pytest.mark.parametrize("lab", LABS)
def test_the_book_page_of_a_lab_agrees_with_the_lab(lab):
    page = (BOOK / "labs" / f"{lab}.md").read_text()
    index = (BOOK / "labs" / "index.md").read_text()
    assert book_page_problems(lab, intro_cell(lab), page, index) == []


def test_the_introduction_places_each_lab_after_the_chapters_it_needs():
    needs = {lab: needed_chapters(intro_cell(lab)) for lab in LABS}
    assert placement_problems((BOOK / "intro.md").read_text(), needs) == []


def test_what_each_lab_needs():
    """The chapters each lab uses, read from its code: Lab 1's estimate_alpha is chapter 5's pooled
    estimator; Lab 2 counts bytes (chapter 1), predicts its speedup (5, 6) and builds chapter 7's decoder."""
    assert needed_chapters(intro_cell("lab1")) == ["02_acceptance", "03_exactness", "05_tokens_per_step"]
    assert needed_chapters(intro_cell("lab2")) == ["01_memory_bound", "05_tokens_per_step", "06_speedup",
                                                   "07_machines"]


# ------------------------------------------------------------------------------ the rules can fail

GOOD_INTRO = f"""# Lab 9

**Time needed:** about 2 hours (1 to 3).
**Chapters needed:** [2. Acceptance]({BASEURL}/book/02_acceptance.html) and
[5. Tokens]({BASEURL}/book/05_tokens_per_step.html).

| Part | What you write | Points |
"""
SOME_CHAPTERS = {"02_acceptance": "**In the labs:** {doc}`Lab 9 <labs/lab9>` has you write it.\n",
                 "05_tokens_per_step": "See {doc}`labs/lab9`.\n",
                 "06_speedup": "No lab here.\n"}


def test_rules_pass_a_synthetic_lab_that_follows_them():
    assert stated_time(GOOD_INTRO) == "2 hours (1 to 3)"
    assert needed_chapters(GOOD_INTRO) == ["02_acceptance", "05_tokens_per_step"]
    assert intro_problems("lab9", GOOD_INTRO, SOME_CHAPTERS) == []
    assert backlink_problems("lab9", GOOD_INTRO, SOME_CHAPTERS) == []
    assert placement_problems("Lab 9 fits after chapter 5.", {"lab9": needed_chapters(GOOD_INTRO)}) == []


@pytest.mark.parametrize("broken", ["no time", "no chapters", "unknown chapter", "chapters after the paragraph"])
def test_an_intro_that_leaves_something_out_is_caught(broken):
    intro = {
        "no time": GOOD_INTRO.replace("**Time needed:** about 2 hours (1 to 3).", "It takes a while."),
        "no chapters": GOOD_INTRO.replace("**Chapters needed:**", "Background:"),
        "unknown chapter": GOOD_INTRO.replace("05_tokens_per_step", "05_tokens_per_stp"),
        # links further down the cell are not the chapters it needs
        "chapters after the paragraph": GOOD_INTRO.replace("**Chapters needed:** ", "**Chapters needed:**\n\n"),
    }[broken]
    assert intro_problems("lab9", intro, SOME_CHAPTERS), broken


def test_a_chapter_without_a_link_to_its_lab_is_caught():
    chapters = dict(SOME_CHAPTERS, **{"05_tokens_per_step": "Lab 9 practises this (a mention, not a link).\n"})
    assert backlink_problems("lab9", GOOD_INTRO, chapters) == [
        "book/05_tokens_per_step.md: lab9 needs this chapter, but the chapter does not link to {doc}`labs/lab9`"]
    # a link to another lab does not count
    chapters["05_tokens_per_step"] = "{doc}`Lab 1 <labs/lab1>`\n"
    assert len(backlink_problems("lab9", GOOD_INTRO, chapters)) == 1


def test_an_introduction_placing_a_lab_too_early_is_caught():
    needs = {"lab9": needed_chapters(GOOD_INTRO)}
    assert placement_problems("Read in order; Lab 9 fits after chapter 3.", needs) == [
        "book/intro.md places lab9 after chapter 3, but it needs chapter 5"]
    assert placement_problems("Read in order.", needs)


def test_a_book_page_that_disagrees_with_the_lab_is_caught():
    page = "**Time needed:** about 2 hours (1 to 3). **Student notebook:**"
    index = "| {doc}`Lab 9 <lab9>` | it | {doc}`2 <../02_acceptance>`, {doc}`5 <../05_tokens_per_step>` |\n"
    assert book_page_problems("lab9", GOOD_INTRO, page, index) == []
    assert book_page_problems("lab9", GOOD_INTRO, page.replace("2 hours", "5 hours"), index)
    assert book_page_problems("lab9", GOOD_INTRO, page, index.replace(", {doc}`5 <../05_tokens_per_step>`", ""))


# ----------------------------------------------------------------------------- one name, one signature
def functions(source: str) -> dict[str, list[str]]:
    """Top-level function name -> its parameter names, in the code of a cell (or a whole module)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            out[node.name] = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return out


def signature_clashes(chapter_cells: dict[str, list[str]], lab_functions: dict[str, dict[str, list[str]]]) -> list[str]:
    """chapter -> code cells; lab -> its graded functions' parameters. A chapter's function named like a lab's
    must take the same parameters: a reader who copies it into the lab would hand in the wrong one."""
    graded = {name: (lab, params) for lab, defined in lab_functions.items() for name, params in defined.items()}
    problems = []
    for chapter, cells in chapter_cells.items():
        for name, params in (item for code in cells for item in functions(code).items()):
            lab, wanted = graded.get(name, (None, params))
            if params != wanted:
                problems.append(f"{chapter} defines {name}({', '.join(params)}); {lab} grades {name}({', '.join(wanted)})")
    return problems


def chapter_code() -> dict[str, list[str]]:
    return {p.stem: [c.source for c in jupytext.read(p).cells if c.cell_type == "code"]
            for p in sorted(BOOK.glob("*.md")) if p.read_text().startswith("---\njupytext")}


def lab_signatures() -> dict[str, dict[str, list[str]]]:
    from autograder.authoring.reference import reference_cells

    return {lab: {n: ps for _, code in reference_cells(lab) for n, ps in functions(code).items()} for lab in LABS}


def test_a_chapter_function_named_like_a_lab_s_takes_its_parameters():
    cells, labs = chapter_code(), lab_signatures()
    assert len(cells) >= 9 and labs["lab1"]["acceptance_prob"] == ["p", "q", "x"]
    assert signature_clashes(cells, labs) == []


def test_a_clash_is_named():
    clash = {"02_acceptance": ["import numpy as np\n\n\ndef acceptance_prob(p, q):\n    return p / q\n"]}
    assert signature_clashes(clash, lab_signatures()) == [
        "02_acceptance defines acceptance_prob(p, q); lab1 grades acceptance_prob(p, q, x)"]
