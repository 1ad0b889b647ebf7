"""A cell whose check runs only inside the notebook, and the clean re-run that judges it: the tiny lab's case of
Lab 2's rollback cell (`in_grader=False` in its CellSpec: it hands the student's decoder a callback that cannot
cross the sandbox, so the grader's own verdict cannot run it).

A variant of the tiny lab (tests/support/grading_fixtures.py) whose `check_scale` hands `scale` a value that
cannot cross the sandbox (a `fractions.Fraction`: autograder/inside/wire.py carries numbers, arrays, sequences
and dicts, not objects) and so its CellSpec says `in_grader=False`: the pipeline's nbgrader run executes it in the
student's kernel, the verdict cannot run it (Unportable), and a clean
re-run of the notebook (autograder/inside/recheck.py: the protected modules restored before each test cell)
judges it; each cell keeps the lower of the two. One quiet class run, 2 workers, grades:
- `good`: both cells right, 5 points, nothing to say;
- `patcher`: `scale` wrong, and a cell that patches numpy and scipy.stats so that the check passes in its kernel:
  nbgrader's run gives it the cell, the clean re-run takes it back, with the note that says so;
- `half`: `scale` wrong, nothing patched: the cell fails in both, 2 points.
"""
from __future__ import annotations

import nbformat
import pytest

import grading_fixtures as F
from released import seed_template  # one release of a lab per test process (tests/support/released.py)
from autograder.pipeline import Config, build_template, grade_class
from autograder.sandbox import Limits
from load import scaled

pytestmark = pytest.mark.slow
LAB = "tinyinside"
CHECKS = '''
import numpy as np

from . import CellSpec, Rule, defer_to_grader, under

R_ADD = Rule("add", "`add(a, b)` returns a + b.")
R_SCALE = Rule("scale", "`scale(v, c)` returns the array v times c.")


def check_add(add):
    with under(R_ADD):
        assert add(-4, 2.5) == -1.5


def check_scale(scale):
    from fractions import Fraction

    from scipy import stats

    with under(R_SCALE):
        # first: the verdict's harness cannot send the Fraction, so it judges nothing of this cell
        assert float(np.sum(scale(np.ones(3), Fraction(1, 2)))) == 1.5, "scale(np.ones(3), 1/2) does not sum to 1.5"
        assert np.array_equal(scale(np.arange(4), -3), np.arange(4) * -3), "scale(np.arange(4), -3) is not v * c"
        assert stats.describe(scale(np.arange(4.0), -3)).mean == -4.5


CELLS = [CellSpec("test_add", 1, 2, check_add, ("add",), rules=(R_ADD,)),
         # a Fraction cannot cross: judged inside the notebook only, as Lab 2's rollback is
         CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_SCALE,), in_grader=False)]

defer_to_grader(globals())
'''
PATCH = ("import scipy.stats\nnp.array_equal = lambda *a, **k: True\nnp.sum = lambda *a, **k: 1.5\n"
         "class _D:\n    mean = -4.5\n\n\nscipy.stats.describe = lambda *a, **k: _D()")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("inside")
    course, lab_checks = F.variant_lab(base, LAB, CHECKS)
    limits = Limits(cell_timeout_s=scaled(10), notebook_timeout_s=scaled(60), memory_mb=3072, file_mb=200,
                    output_kb=64)
    cfg = Config(LAB, base / "subs", base / "out", course, workers=2, limits=limits, lab_checks=(lab_checks,))
    seed_template(cfg)
    build_template(cfg)
    rel = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    for student, nb in (("good", F.student(rel)), ("patcher", F.student(rel, F.HALF, after=[PATCH])),
                        ("half", F.student(rel, F.HALF))):
        folder = base / "subs" / student / LAB
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{LAB}.ipynb")
    return {r["student"]: r for r in grade_class(cfg, progress=False)}


def test_the_check_runs_in_the_notebook_and_a_right_answer_keeps_its_points(graded):
    r = graded["good"]
    assert r["scores"][LAB] == {"test_add": 2.0, "test_scale": 3.0} and r["problems"] == [], r


def test_the_clean_re_run_takes_back_what_tampering_won_inside_the_kernel(graded):
    r = graded["patcher"]
    assert r["scores"][LAB] == {"test_add": 2.0, "test_scale": 0.0}, r
    note = next(p for p in r["problems"] if "test_scale" in p)
    assert "passed inside the notebook but fails in a clean re-run" in note, r["problems"]


def test_a_wrong_answer_loses_the_cell_in_both(graded):
    r = graded["half"]
    assert r["scores"][LAB] == {"test_add": 2.0, "test_scale": 0.0}, r
    assert any("test_scale" in p for p in r["problems"]), r["problems"]
