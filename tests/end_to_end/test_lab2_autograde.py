"""Lab 2 under the REAL `nbgrader autograde`: the reference gets full marks within the budget,
the untouched release notebook gets 0 without crashing.

Autograding a Lab 2 notebook takes a minute or more (it loads the shipped pair and times the
decoder), so the mutants are graded by calling the hidden checks directly
(tests/autograder/checks/test_lab2.py), the same functions the test cells call.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.checks.lab2 import CELLS
from autograder.audit.mutants import make_submission

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab2"
BUDGET_S = 300.0  # issue 6: autograding one Lab 2 submission <= 5 minutes on 2 cores (CPU time: see tests/load.py)
POINTS = {c.grade_id: c.points for c in CELLS}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def lab2_graded(session_course):
    course = session_course
    release_dir = course.generate(LAB)
    release = nbformat.read(release_dir / f"{LAB}.ipynb", as_version=4)
    course.add_submission("lab2_reference", LAB, make_submission(LAB, release))
    reference = course.autograde(LAB, "lab2_reference")
    course.add_submission("lab2_untouched", LAB, release)
    untouched = course.autograde(LAB, "lab2_untouched")
    return course, {"reference": reference, "untouched": untouched}


def test_reference_gets_full_marks_within_budget(lab2_graded):
    course, timing = lab2_graded
    scores = course.scores(LAB, "lab2_reference")
    print(f"autograding the Lab 2 reference took {timing['reference']}, the untouched release {timing['untouched']}")
    assert scores == {g: (float(p), float(p)) for g, p in POINTS.items()}
    assert timing["reference"].cpu_s <= BUDGET_S


def test_untouched_release_gets_zero(lab2_graded):
    course, _ = lab2_graded
    scores = course.scores(LAB, "lab2_untouched")
    assert set(scores) == set(POINTS)
    assert all(score == 0 for score, _ in scores.values()), scores


def test_release_matches_generated(lab2_graded):
    """labs/lab2 is what `make labs` generates from solutions/lab2 (sources of every cell)."""
    course, _ = lab2_graded
    fresh = nbformat.read(course.root / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    committed = nbformat.read(ROOT / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    assert [c.source for c in fresh.cells] == [c.source for c in committed.cells]


def test_source_notebook_is_built_from_the_markdown_source():
    from autograder.authoring import labs

    assert labs.build(LAB, check=True), "solutions/lab2/lab2.ipynb is stale: run `make labs`"
