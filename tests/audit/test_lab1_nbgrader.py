"""Audit `lab1_nbgrader` (`make audit lab1_nbgrader`): Lab 1 under the REAL `nbgrader autograde`: reference,
untouched release, catalog mutants.

One session-scoped course holds all submissions: the reference solution is
autograded alone (its CPU time, nbgrader and its kernel, is the per-submission budget
check, <= 60 s: wall time would grow with other processes' load; both are printed), then
the untouched release notebook and one student per mutant of REAL_GRADER are autograded in
a single `nbgrader autograde` call: the mutants of issue 31 (the right law, not the algorithm)
and one of each other part. Every catalog mutant is also judged by its part's checks called
directly (tests/autograder/checks/test_lab1.py), the functions these test cells call. A mutant's
notebook is the reference's part 1 and the mutant's own part (the mutant in place of the
reference function), the other parts left as released: each part's checks call only that part's
functions and part 1's, so the mutant is judged exactly as in a complete notebook, and the other
parts fail at once instead of running every statistical check again (about 25 s per
notebook). One more mutant is graded in a complete notebook, the one whose hidden
message is inspected below.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.checks.lab1 import CELLS
from autograder.audit.mutants import make_submission
from autograder.audit.mutants.lab1 import MUTANTS
from submissions import only_parts

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab1"
BUDGET_S = 60.0
POINTS = {c.grade_id: c.points for c in CELLS}
PART = {c.grade_id: c.part for c in CELLS}

pytestmark = pytest.mark.slow
MESSAGE_MUTANT = "batch_ratio_from_first_row"
REAL_GRADER = ["accept_ratio_inverted", "sampler_ignores_q", "sampler_ignores_draft", "sampler_half_acceptance",
               "block_no_bonus", "alpha_naive_per_block", "batch_ignores_q", "batch_neighbours_share_uniforms"]
GRADED = [m for m in MUTANTS if m.name in REAL_GRADER]


@pytest.fixture(scope="session")
def lab1_graded(session_course, audit_grades):
    """Autograde reference (alone, timed), then release + all mutants (one call)."""
    course = session_course
    release_dir = course.generate(LAB)
    release = nbformat.read(release_dir / f"{LAB}.ipynb", as_version=4)
    course.add_submission("reference", LAB, make_submission(LAB, release))
    reference = course.autograde(LAB, "reference")
    course.add_submission("untouched", LAB, release)
    for m in GRADED:
        course.add_submission(f"mutant_{m.name}", LAB, only_parts(make_submission(LAB, release, m), release, {1, m.part}))
    (message,) = [m for m in MUTANTS if m.name == MESSAGE_MUTANT]
    course.add_submission("complete_mutant", LAB, make_submission(LAB, release, message))
    n_others = 2 + len(GRADED)
    others = course.autograde(LAB, "*", exclude="reference", timeout=60 * n_others)  # about 13 s each, quiet
    audit_grades.student("reference", {g: sc for g, (sc, _) in course.scores(LAB, "reference").items()},
                         {g: float(p) for g, p in POINTS.items()})
    audit_grades.student("untouched", {g: sc for g, (sc, _) in course.scores(LAB, "untouched").items()},
                         {g: 0.0 for g in POINTS})
    for m in GRADED:
        scores = {g: sc for g, (sc, _) in course.scores(LAB, f"mutant_{m.name}").items()}
        caught = any(scores[g] < POINTS[g] for g in scores if PART[g] == m.part)
        audit_grades.student(f"mutant_{m.name}", scores,
                             {g: f"a cell of part {m.part} below its points" for g in scores},
                             held={g: caught for g in scores})
    return course, {"reference": reference, "others": others, "n_others": n_others}


def test_reference_gets_full_marks_within_budget(lab1_graded):
    course, timing = lab1_graded
    scores = course.scores(LAB, "reference")
    assert scores == {g: (float(p), float(p)) for g, p in POINTS.items()}
    print(f"autograding the reference submission alone took {timing['reference']}; "
          f"the other {timing['n_others']} submissions in one call took {timing['others']}")
    assert timing["reference"].cpu_s <= BUDGET_S


def test_untouched_release_gets_zero(lab1_graded):
    course, _ = lab1_graded
    scores = course.scores(LAB, "untouched")
    assert set(scores) == set(POINTS)
    assert all(score == 0 for score, _ in scores.values()), scores


def test_the_mutants_graded_here_exist_and_cover_every_part():
    assert len(GRADED) == len(REAL_GRADER) and {m.part for m in GRADED} == {c.part for c in CELLS}


@pytest.mark.parametrize("m", GRADED, ids=[m.name for m in GRADED])
def test_mutant_loses_points_in_its_part(lab1_graded, m):
    course, _ = lab1_graded
    scores = course.scores(LAB, f"mutant_{m.name}")
    lost = {g for g, (score, top) in scores.items() if score < top}
    assert any(PART[g] == m.part for g in lost), f"{m.name} ({m.doc}) lost points only in {sorted(lost)}"


@pytest.mark.parametrize(("name", "lost", "kept"), [
    ("sampler_ignores_q", "test_sampler_exactness", "test_sampler_contracts"),
    ("sampler_ignores_draft", "test_sampler_exactness", "test_sampler_contracts"),
    ("sampler_half_acceptance", "test_sampler_exactness", "test_sampler_contracts"),
    ("batch_ignores_q", "test_batch_exactness", "test_batch_contracts"),
])
def test_the_right_law_without_the_algorithm_loses_the_law_cell_only(lab1_graded, name, lost, kept):
    """Issue 31: a sampler whose output follows p without running speculative sampling loses the cell that
    certifies the algorithm (its coupling cases) and keeps the contract it meets."""
    course, _ = lab1_graded
    scores = course.scores(LAB, f"mutant_{name}")
    assert scores[lost][0] == 0 and scores[kept][0] == scores[kept][1] > 0, scores


def test_failure_message_reaches_the_student_without_the_solution(lab1_graded):
    """The autograded notebook shows which property failed and by how much, and no solution code.

    This mutant passes the visible check (one (p, q) pair for every row), so the message is the hidden test's.
    """
    course, _ = lab1_graded
    nb = nbformat.read(course.root / "autograded" / "complete_mutant" / LAB / f"{LAB}.ipynb",
                       as_version=4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_batch_exactness"]
    text = "\n".join(o.get("evalue", "") + "".join(o.get("traceback", [])) for o in cell.outputs)
    assert "total variation" in text and "standard deviations" in text
    assert "np.maximum(p - q" not in text and "BEGIN SOLUTION" not in text
