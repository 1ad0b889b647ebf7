"""The book builds, executed, with no warnings; and a broken page really breaks the build.

The full build here executes every chapter from scratch (its own empty execution cache
under tmp_path), so a chapter that raises, or a warning anywhere (a broken
cross-reference, an unknown citation), fails `make test` as it fails `make book`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bookpages import toc_documents
from load import scaled

ROOT = Path(__file__).resolve().parents[2]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
FLAGS = ["-W", "-n", "--keep-going"]


def toc_files() -> list[str]:
    """Every page named in _toc.yml, as a path without suffix."""
    return list(toc_documents())


def build(source: Path, output: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(JUPYTER_BOOK), "build", str(source), "--path-output", str(output), *FLAGS],
        capture_output=True,
        text=True,
        timeout=scaled(1200),
    )


def mini_book(tmp_path: Path, extra_markdown: str) -> Path:
    """A one-page book with the course's _config.yml and page header, its body `extra_markdown`."""
    book = tmp_path / "book_src"
    (book / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", book)
    shutil.copy(ROOT / "references.bib", book)
    shutil.copytree(ROOT / "book" / "_ext", book / "book" / "_ext")  # the book's own Sphinx extension
    (book / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    # the course's own front matter (jupytext header), a page body of its own: the real intro
    # links to other pages of the book ({doc}`notation`), which a one-page book does not have
    intro = (ROOT / "book" / "intro.md").read_text()
    header = intro[: intro.index("\n---\n", 4) + 5]
    (book / "book" / "intro.md").write_text(header + "\n# A one-page book\n\n" + extra_markdown + "\n")
    return book


def test_every_chapter_is_in_the_table_of_contents():
    listed = {f + ".md" for f in toc_files()}
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "book").rglob("*.md")}
    assert on_disk == listed, f"pages not in _toc.yml: {on_disk - listed}; missing files: {listed - on_disk}"


def test_no_notebook_is_committed_in_the_book():
    tracked = subprocess.run(
        ["git", "ls-files", "book"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [f for f in tracked if f.endswith(".ipynb")], "book/*.ipynb are build output"


def test_setup_is_up_to_date_after_make_setup():
    """`make setup` ran before the tests; a second one must have nothing to install."""
    if not (ROOT / ".venv").is_dir():
        pytest.skip("not running from the make-managed .venv")
    dry_run = subprocess.run(["make", "-n", "setup"], cwd=ROOT, capture_output=True, text=True)
    assert dry_run.returncode == 0, dry_run.stderr
    assert "pip install" not in dry_run.stdout, "make setup would reinstall: " + dry_run.stdout


@pytest.mark.slow
def test_whole_book_builds_fresh_without_warnings(fresh_book):
    result, tmp_path = fresh_book
    log = result.stdout + result.stderr
    # a kernel's warnings count too: the pages' kernels are encrypted (test_book_kernel.py), so ipykernel has
    # no "running over TCP without encryption" to print
    failures = [line for line in log.splitlines() if "WARNING" in line]
    assert result.returncode == 0 and not failures, (
        "book build failed:\n" + "\n".join(failures[:40]) + "\n--- tail ---\n" + log[-4000:]
    )
    html = tmp_path / "_build" / "html"
    assert (html / "index.html").exists()
    for page in toc_files():
        assert (html / (page + ".html")).exists(), f"no HTML for {page}"


@pytest.mark.slow
def test_a_failing_cell_fails_the_build_and_is_named(tmp_path):
    source = mini_book(tmp_path, "```{code-cell} ipython3\nbroken_value = 1 / 0\n```")
    result = build(source, tmp_path / "out")
    log = result.stdout + result.stderr
    assert result.returncode != 0, "a cell raising ZeroDivisionError did not fail the build"
    assert "broken_value = 1 / 0" in log, "the error does not show the failing cell"
    assert "ZeroDivisionError" in log
    assert "intro.md" in log, "the error does not name the page"


@pytest.mark.slow
def test_a_broken_cross_reference_fails_the_build(tmp_path):
    source = mini_book(tmp_path, "See {ref}`a-label-that-does-not-exist`.")
    result = build(source, tmp_path / "out")
    log = result.stdout + result.stderr
    assert result.returncode != 0, "a broken cross-reference did not fail the build"
    assert "a-label-that-does-not-exist" in log


@pytest.mark.slow
def test_cached_build_never_shows_a_stale_output(tmp_path):
    """With `execute_notebooks: cache`, changing a cell re-executes it on the next build."""
    cell = "```{{code-cell}} ipython3\nprint('marker-{}')\n```"
    source = mini_book(tmp_path, cell.format("first"))
    out = tmp_path / "out"
    assert build(source, out).returncode == 0
    page = out / "_build" / "html" / "book" / "intro.html"
    assert "marker-first" in page.read_text()
    md = source / "book" / "intro.md"
    md.write_text(md.read_text().replace("marker-first", "marker-second"))
    assert build(source, out).returncode == 0
    text = page.read_text()
    assert "marker-second" in text and not re.search(r"marker-first", text)


CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.md"))
CODE_CELL = re.compile(r"```\{code-cell\} ipython3\n(.*?)\n```", re.S)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_opens_with_objectives_and_closes_with_a_quiz(chapter):
    text = chapter.read_text()
    head = text[: text.index("\n## ")]  # before the first section
    assert "```{admonition} In this chapter" in head and "After this chapter you can" in head
    assert "**Prerequisites:**" in head and "**Time:**" in head
    quiz_cells = [c for c in CODE_CELL.findall(text) if "quiz.show(questions)" in c]
    assert len(quiz_cells) == 1, "one self-check quiz per chapter"
    cell = quiz_cells[0]
    n_questions = cell.count("quiz.MultipleChoice(") + cell.count("quiz.Numeric(")
    assert n_questions >= 4 and "quiz.MultipleChoice(" in cell and "quiz.Numeric(" in cell
    assert "assert len(questions) >= 4" in cell


@pytest.mark.parametrize("page", sorted((ROOT / "book").rglob("*.md")), ids=lambda p: p.stem)
def test_every_figure_has_a_caption_and_no_solution_code_is_inert(page):
    text = page.read_text()
    for cell in CODE_CELL.findall(text):
        if "plt.subplots" in cell or "plt.plot(" in cell:
            assert "mystnb:" in cell and "caption:" in cell and "name: fig-" in cell, (
                f"{page.name}: a figure without caption/label:\n{cell[:300]}"
            )
    assert "```python" not in text, f"{page.name}: a ```python block never runs; use a code-cell"
