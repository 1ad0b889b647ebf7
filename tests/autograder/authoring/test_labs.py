"""The labs' one source: solutions/<lab>/<lab>.md (MyST) + autograder/checks/<lab>.py (autograder/authoring/labs.py).

Built notebooks are in sync, every cell has a stable id, the builder refuses a test cell
that disagrees with its CellSpec, the reference solution imports from the markdown, the
labs link to the rendered book, and a lab written this way (tests/tiny_lab/tiny.md) is
built, released and autograded by the real nbgrader.
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import nbformat
import pytest
import yaml

import grading_fixtures as F
from autograder.authoring import labs, reference
from autograder.checks import tiny
from autograder.audit.mutants import make_submission

ROOT = Path(__file__).resolve().parents[3]
LABS = labs.all_labs()


def test_every_lab_is_found():
    assert LABS == ["lab1", "lab2"]


@pytest.mark.parametrize("lab", LABS)
def test_committed_source_notebook_is_in_sync(lab):
    assert labs.build(lab, check=True), f"solutions/{lab}/{lab}.ipynb is stale: run `make labs`"


@pytest.mark.parametrize("lab", LABS)
def test_every_cell_has_a_stable_id_kept_by_the_release(lab):
    source = nbformat.read(ROOT / "solutions" / lab / f"{lab}.ipynb", as_version=4)
    release = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)
    ids = [c.id for c in source.cells]
    assert ids == [c.metadata["nbgrader"]["grade_id"] for c in source.cells]
    assert len(set(ids)) == len(ids) and not any(re.fullmatch(r"cell-\d+", i) for i in ids)
    assert [c.id for c in release.cells] == ids


def _book_links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)]*book/[^)]*)\)", text)


@pytest.mark.parametrize("lab", LABS)
def test_labs_link_to_the_rendered_book(lab):
    base = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["baseurl"].rstrip("/")
    text = (ROOT / "labs" / lab / f"{lab}.ipynb").read_text()
    links = _book_links(text)
    assert links, "the lab links to no book page"
    for link in links:
        assert link.startswith(f"{base}/book/") and link.endswith(".html"), link
        page = link[len(base) + 1:-len(".html")] + ".md"
        assert (ROOT / page).exists(), f"{link}: no {page}"


def _tiny_source(tmp_path: Path, edit=None) -> Path:
    (tmp_path / "solutions" / "tiny").mkdir(parents=True)
    text = F.SOURCE_MD.read_text()
    (tmp_path / "solutions" / "tiny" / "tiny.md").write_text(edit(text) if edit else text)
    return tmp_path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("points: 3", "points: 4"), "4 points in the markdown, 3 in checks.tiny.CELLS"),
    (lambda t: t.replace("_checks.check_scale(scale)", "pass"), "test_scale: the cell must start with"),
    (lambda t: t.replace("grade_id: setup, ", ""), "has no nbgrader grade_id"),
    (lambda t: t.replace("grade_id: test_add", "grade_id: test_sum"), "differ from checks.tiny.CELLS"),
    (lambda t: t.replace("# 2 point(s)", "# two points"), "must start with '# 2 point(s)'"),
])
def test_builder_refuses_a_source_that_disagrees_with_its_checks(tmp_path, edit, message):
    root = _tiny_source(tmp_path, edit)
    with pytest.raises(ValueError, match=re.escape(message)):
        labs.build("tiny", root=root)


def test_builder_writes_ids_and_metadata_from_the_cell_options(tmp_path):
    root = _tiny_source(tmp_path)
    labs.build("tiny", root=root)
    nb = nbformat.read(root / "solutions" / "tiny" / "tiny.ipynb", as_version=4)
    assert [c.id for c in nb.cells] == ["intro", "setup", "impl", "test_add", "test_scale"]
    meta = nb.cells[4].metadata["nbgrader"]
    assert meta == {"grade": True, "grade_id": "test_scale", "locked": True, "points": 3, "solution": False,
                    "schema_version": 3}
    assert labs.build("tiny", check=True, root=root)


def test_reference_is_the_solution_code_of_the_markdown():
    lab1, lab2 = reference.load("lab1"), reference.load("lab2")
    assert reference.load("lab1") is lab1  # cached
    assert callable(lab1.speculative_sample) and callable(lab2.speculative_decode)
    assert lab1.estimate_alpha([2, 0, 3], 3) == pytest.approx(5 / 7)
    # test cells, demonstrations and prose are not run: their names are absent
    assert not hasattr(lab1, "simulate_logs") and not hasattr(lab1, "speedup") and not hasattr(lab2, "target")
    assert inspect.unwrap(lab2.speculative_decode).__code__.co_filename.endswith("lab2.md:impl_part2")


def test_release_has_no_markdown_source_or_solution():
    for lab in LABS:
        assert sorted(p.name for p in (ROOT / "labs" / lab).iterdir()) == [f"{lab}.ipynb"]
        text = (ROOT / "labs" / lab / f"{lab}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text


@pytest.mark.slow
def test_a_lab_written_as_myst_is_built_released_and_autograded(tmp_path):
    """tests/support/tiny_lab/ (tiny.md and its checks, tiny.py), through the real nbgrader."""
    from courses import NbgraderCourse

    course = NbgraderCourse(F.make_course(tmp_path / "course"))
    release = nbformat.read(course.generate("tiny") / "tiny.ipynb", as_version=4)
    assert sorted(p.name for p in (course.root / "labs" / "tiny").iterdir()) == ["tiny.ipynb"]
    course.add_submission("good", "tiny", F.student(release))
    course.add_submission("half", "tiny", F.student(release, F.HALF))
    course.add_submission("untouched", "tiny", release)
    course.autograde("tiny")
    points = {c.grade_id: float(c.points) for c in tiny.CELLS}
    assert course.scores("tiny", "good") == {g: (p, p) for g, p in points.items()}
    assert course.scores("tiny", "half") == {"test_add": (2.0, 2.0), "test_scale": (0.0, 3.0)}
    assert course.scores("tiny", "untouched") == {g: (0.0, p) for g, p in points.items()}


def test_make_submission_fills_every_solution_cell():
    release = nbformat.read(ROOT / "labs" / "lab2" / "lab2.ipynb", as_version=4)
    text = "\n".join(c.source for c in make_submission("lab2", release).cells)
    assert "raise NotImplementedError" not in text and "def speculative_decode(" in text


def test_normalise_keeps_one_copy_of_each_ungraded_cell_in_release_order():
    """Issue 17: Lab 1's demonstration cells (simulate_logs, speed_demo, plot_demo) kept, edited, moved,
    deleted or stripped of metadata come back once each, in the release's order; the student's own cell stays."""
    import copy
    import json

    from autograder.pipeline import normalise

    release = json.loads((ROOT / "labs" / "lab1" / "lab1.ipynb").read_text())
    order = [c["id"] for c in release["cells"]]
    student = json.loads(nbformat.writes(make_submission("lab1", nbformat.from_dict(release))))
    cells = {c["id"]: c for c in student["cells"]}
    cells["simulate_logs"]["source"] += "\nprint('my edit')"  # edited
    plot = cells["plot_demo"]
    student["cells"].remove(plot)
    student["cells"].insert(2, plot)  # moved to the top
    student["cells"] = [c for c in student["cells"] if c["id"] != "speed_demo"]  # deleted
    bare = copy.deepcopy(cells["part4-compare"])
    bare["metadata"].pop("nbgrader")  # markdown stripped of its metadata, recognised by its id
    student["cells"] = [bare if c["id"] == "part4-compare" else c for c in student["cells"]]
    mine = json.loads(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('mine')")])))
    mine_id = mine["cells"][0]["id"]
    student["cells"].append(mine["cells"][0])
    fixed, lines = normalise(student, release)
    ids = [c["id"] for c in fixed["cells"]]
    assert len(ids) == len(order) + 1 and [i for i in ids if i in order] == order, ids
    # the student's own cell follows the lab cell it followed in the submission (the release's last cell)
    assert order[-1] != "plot_demo" and ids.index(mine_id) == ids.index(order[-1]) + 1
    source = {c["id"]: "".join(c["source"]) for c in fixed["cells"]}
    assert source["simulate_logs"] == "".join(next(c for c in release["cells"] if c["id"] == "simulate_logs")["source"])
    assert "lab cells were moved; put back in their places" in lines
    assert len(release["cells"]) == 34  # the lab as released: 12 graded cells, and Part 6 (ungraded)
