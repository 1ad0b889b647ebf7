"""Each real lab, graded end to end once by the course's own pipeline: the one proof in `make test` that the real
labs grade.

For each lab, one quiet class run (`grade_class`, `--workers 2`, the default limits and bounds, the sandbox)
grades the reference solution in the released notebook: it keeps every point of every cell with nothing to
complain of; its result, feedback page and grades table are written; the release the pipeline builds is the one
`make labs` commits. The release as handed out fails every hidden check, called directly here (the last test);
graded through the pipeline, it gets nothing in the `lab1_class`, `lab1_nbgrader` and `lab2_class` audits.

The reference's timed cells are timed as the class run times them: after the untimed checks, alone, first in
line for the CPU (autograder/pipeline/grade.py). No other student runs meanwhile, but the suite's other test
process may: a timing that stays unclear holds its points pending (never awarded, never taken), so a cell held
is accepted here only when its points are held whole and the cell is one the lab times. That a quiet machine
leaves nothing pending, and that the classes with hostile classmates grade under load, are the `lab1_class` and
`lab2_class` audits (`make audit`, tests/README.md). That the grader's speed figure is the one the notebook
prints is the `timing_agreement` audit's: one grader figure beside one notebook figure moves with the machine's
state (single pairs measured 0.60-1.47 of each other on this machine), so it is judged there on the median of
paired figures, on a quiet machine and under load, and `make test` checks that audit's committed report.
"""
from __future__ import annotations

import csv
import types
from importlib import import_module
from pathlib import Path

import nbformat
import pytest

from autograder.audit.mutants import make_submission
from autograder.checks import hidden
from autograder.pipeline import Config, build_template, grade_class

ROOT = Path(__file__).resolve().parents[2]
LABS = ["lab1", "lab2"]
pytestmark = pytest.mark.slow


TEST_KEY = bytes(range(32))  # a grading run's key (autograder/checks/hidden.py), fixed so a failure reproduces


def cells(lab: str) -> list:
    """The lab's graded cells (`CellSpec`s of autograder/checks/<lab>.py)."""
    return import_module(f"autograder.checks.{lab}").CELLS


def timed_cells(lab: str) -> set[str]:
    return {c.grade_id for c in cells(lab) if c.timed}


@pytest.fixture(scope="module", params=LABS)
def graded(request, tmp_path_factory):
    lab = request.param
    base = tmp_path_factory.mktemp(f"real-{lab}")
    cfg = Config(lab, base / "subs", base / "out", ROOT, workers=2)
    layout = build_template(cfg)
    release = nbformat.read(cfg.out / "template" / "labs" / lab / f"{lab}.ipynb", as_version=4)
    folder = cfg.submissions / "reference" / lab
    folder.mkdir(parents=True)
    nbformat.write(make_submission(lab, release), folder / f"{lab}.ipynb")
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    for r in results.values():
        print(lab, r["student"], r["score"], r.get("seconds"), r.get("timed_runs"), r.get("pending"),
              [p[:200] for p in r["problems"]])
    return lab, cfg, layout, release, results


def test_the_reference_keeps_every_point(graded):
    lab, _, layout, _, results = graded
    r = results["reference"]
    points = layout[lab]
    assert r["max_score"] == sum(points.values())
    pending = (r.get("pending") or {}).get(lab, {})
    # a cell held pending is a timed cell held whole, its score 0 until it is timed again (never taken)
    assert set(pending) <= timed_cells(lab) and all(pending[g] == points[g] for g in pending), r["pending"]
    assert {g: s + pending.get(g, 0.0) for g, s in r["scores"][lab].items()} == points, (r["scores"], r["problems"])
    assert not [p for p in r["problems"] if "timing pending" not in p], r["problems"]
    assert timed_cells(lab) and r["timed_runs"] >= 1  # both labs time a cell, and the pipeline timed it


def test_every_result_page_and_row_is_written(graded):
    lab, cfg, _, _, results = graded
    assert set(results) == {"reference"}
    assert all((cfg.out / "results" / f"{s}.json").is_file() for s in results)
    assert all((cfg.out / "feedback" / s / lab / f"{lab}.html").is_file() for s in results)
    with open(cfg.out / "grades.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert {s: float(rows[s]["score"]) for s in rows} == {s: r["score"] for s, r in results.items()}


def test_the_release_is_what_make_labs_commits(graded):
    """labs/<lab> is what the pipeline's `nbgrader generate_assignment` makes of solutions/<lab> (every cell's source)."""
    lab, _, _, release, _ = graded
    committed = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)
    assert [c.source for c in release.cells] == [c.source for c in committed.cells]


def release_namespace(lab: str) -> types.ModuleType:
    """The committed release's set-up and solution cells run in order, as a student who changed nothing would
    hand them in: a cell that calls an unwritten function raises, as it does in the notebook, and the next runs."""
    release = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)
    module = types.ModuleType(f"release_{lab}")
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") == "setup"):
            try:
                exec(compile(cell.source, f"{lab}.ipynb:{meta['grade_id']}", "exec"), module.__dict__)  # noqa: S102
            except Exception:  # noqa: BLE001 - e.g. NotImplementedError from a stub the cell calls
                pass
    return module


@pytest.mark.parametrize("lab", LABS)
def test_the_release_as_handed_out_fails_every_hidden_check(lab):
    """Every graded cell's hidden check, called as the test cell calls it (under a grading run's key) on what
    the untouched release defines, fails: a student who hands the release back gets no point."""
    ns = release_namespace(lab)
    assert [c for c in cells(lab) if c.args], lab  # checks that take the student's functions
    passed = []
    for cell in cells(lab):
        try:
            with hidden.keyed(TEST_KEY):
                cell.check(*[getattr(ns, a) for a in cell.args])
        except Exception:  # noqa: BLE001 - any failure costs the cell its points, as in the notebook
            continue
        passed.append(cell.grade_id)
    assert passed == [], f"the untouched {lab} release passes {passed}"
