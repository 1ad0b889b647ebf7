"""No cell keeps nbgrader's score without a second opinion (autograder/pipeline/grade.py, `_Untimed.lower`).

A cell the grader cannot judge itself (`CellSpec(in_grader=False)`: its check runs inside the notebook, as
Lab 2's rollback cell does) has one second opinion, the clean re-run of the notebook in a plain interpreter
(autograder/inside/recheck.py). nbgrader's run happens in a kernel the student's code controls. A notebook
that passes there and under the grader's verdict, and makes the re-run record nothing for the cell (it exits as
soon as it sees the re-run's runner on its stack) used to keep nbgrader's score, since the lower of one score is that score. Now the cell
scores 0, "not reached". The tiny lab is graded here with its `scale` cell judged in the notebook only
(lab `tinyinside`), beside an honest student, who keeps every point.
"""
from __future__ import annotations

import nbformat
import pytest

import grading_fixtures as F
from released import seed_template  # one release of a lab per test process (tests/support/released.py)
from autograder.pipeline import Config, build_template, grade_class
from autograder.pipeline import results as R
from autograder.sandbox import Limits
from load import scaled

pytestmark = pytest.mark.slow
LIMITS = Limits(cell_timeout_s=scaled(5), notebook_timeout_s=scaled(40), memory_mb=3072, file_mb=200, output_kb=64)
LAB = "tinyinside"
# test_scale becomes a cell like Lab 2's rollback cell: its check cannot run across the sandbox wall (the grader's
# verdict finds it Unportable, as it finds a check that hands the student a callback), so it is judged inside the
# notebook, and its one second opinion is the clean re-run
UNPORTABLE = '''def check_scale(scale: Callable) -> None:
    if type(scale).__name__ == "_StandIn":  # called by the grader, across the wall: it cannot be judged there
        from autograder.inside.wire import Unportable

        raise Unportable("this check runs inside the notebook only")
'''
CHECKS = (F.TINY / "tiny.py").read_text().replace(
    'CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_SCALE,), note="0: exact values")',
    'CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_SCALE,), note="0: exact values", in_grader=False)'
).replace("def check_scale(scale: Callable) -> None:\n", UNPORTABLE)
# right in nbgrader's kernel and under the grader's verdict; in the clean re-run (its runner, recheck.py, is on
# the stack) it ends the process before the tests, so that the re-run records nothing
LEAVES_NO_RECORD = ("import inspect, os\n"
                    "if any(f.filename.endswith('recheck.py') for f in inspect.stack()):\n"
                    "    os._exit(0)  # the clean re-run: leave before anything is recorded\n")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    assert "in_grader=False" in CHECKS and "raise Unportable" in CHECKS  # the tiny lines this variant edits are there
    base = tmp_path_factory.mktemp("inside")
    course, lab_checks = F.variant_lab(base, LAB, CHECKS)
    cfg = Config(LAB, base / "subs", base / "out", course, workers=2, limits=LIMITS, lab_checks=(lab_checks,))
    seed_template(cfg)
    build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    for student, nb in (("honest", F.student(release, F.SOLUTION)),
                        ("evasive", F.student(release, F.SOLUTION, after=[LEAVES_NO_RECORD]))):
        d = cfg.submissions / student / LAB
        d.mkdir(parents=True)
        nbformat.write(nb, d / f"{LAB}.ipynb")
    return {r["student"]: r for r in grade_class(cfg, progress=False)}


def test_a_cell_the_rerun_never_reached_scores_nothing(graded):
    r = graded["evasive"]
    assert r["scores"][LAB]["test_scale"] == 0.0, r
    assert any("test_scale" in p and R.NOT_REACHED in p for p in r["problems"]), r["problems"]


def test_an_honest_notebook_keeps_every_point(graded):
    r = graded["honest"]
    assert r["scores"][LAB] == F.POINTS and not r["problems"], r
