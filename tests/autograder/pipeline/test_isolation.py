"""One student's code affects only its own grade: a class of the tiny lab graded beside hostile classmates.

One pipeline run, `--workers 2`, grades a correct student beside:
- a staller, whose `add` never returns when a check calls it inside a section that must run alone
  (`alone()`: in one shared grader process this froze every other student's checks for the call's
  whole limit);
- a memory hog: twenty processes of 100 MB each, each within the per-process limit, plus 2 GB
  written to the RAM-backed /dev/shm (together they took the machine, and the kernel killed the grader);
- a disk filler, writing 16 MB files in its folder until the disk refuses.
Each student is graded in a grader process of its own, its processes in a control group of its own
(autograder/sandbox/bounds.py). The correct student keeps every point, each hostile one loses only its
own, with a note that says why, and the grader survives to write every result. The same hostile classmates
beside the Lab 2 reference, under two outside busy loops, are the `lab2_class` audit (tests/audit/).
"""
from __future__ import annotations

import json

import nbformat
import pytest

import grading_fixtures as F
from autograder.pipeline import Config, build_template, grade_class
from autograder.sandbox import Limits
from autograder.sandbox.bounds import Bounds, available
from load import scaled

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not all(available()[:2]), reason=f"no cgroups or tmpfs here: {available()[2]}")]

LAB = "tinyalone"
STALL_S = scaled(30)  # the per-call limit the staller runs into (the cell limit of this run): six times what the
# correct student's whole grading takes on a quiet machine (about 5 s), stretched with the machine's load
CHECKS = '''
import numpy as np

from . import CellSpec, Rule, defer_to_grader, under
from .alone import alone

R_ADD = Rule("add", "`add(a, b)` returns a + b, and leaves numpy's global random state alone.")
R_SCALE = Rule("scale", "`scale(v, c)` returns the array v times c.")


def check_add(add):
    with under(R_ADD), alone():  # reads process-wide state: no other check of this grader may run meanwhile
        before = np.random.get_state()[1].copy()
        got = add(-4, 2.5)
        assert got == -1.5, f"add(-4, 2.5): expected -1.5, got {got}"
        assert (np.random.get_state()[1] == before).all(), "add moved numpy's global random state"


def check_scale(scale):
    with under(R_SCALE):
        got = scale(np.arange(4), -3)
        assert np.array_equal(got, np.arange(4) * -3), f"scale(np.arange(4), -3): got {got}"


CELLS = [CellSpec("test_add", 1, 2, check_add, ("add",), rules=(R_ADD,)),
         CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_SCALE,))]

defer_to_grader(globals())
'''
STALLER = F.SOLUTION.replace("def add(a, b):\n    return a + b",
                             "def add(a, b):\n    import time\n    time.sleep(10**6)\n    return a + b")
HOG = F.SOLUTION + "\n" + F.memory_hog(20)
FILLER = F.SOLUTION + "\n" + F.DISK_FILLER
BOUNDS = Bounds(memory_mb=1536, processes=256, cpus=1.0, disk_mb=256)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("isolation")
    course, lab_checks = F.variant_lab(base, LAB, CHECKS)
    limits = Limits(cell_timeout_s=STALL_S, notebook_timeout_s=scaled(240), memory_mb=3072, file_mb=200,
                    output_kb=64)
    cfg = Config(LAB, base / "subs", base / "out", course, workers=2, limits=limits, lab_checks=(lab_checks,),
                 bounds=BOUNDS)
    build_template(cfg)
    rel = nbformat.read(cfg.out / "template" / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    for student, solution in (("good", F.SOLUTION), ("staller", STALLER), ("hog", HOG), ("filler", FILLER)):
        d = base / "subs" / student / LAB
        d.mkdir(parents=True)
        nbformat.write(F.student(rel, solution), d / f"{LAB}.ipynb")
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    return cfg, results


def test_the_correct_student_keeps_every_point_and_is_not_held_by_the_staller(graded):
    cfg, results = graded
    good = results["good"]
    assert good["score"] == 5.0 and good["problems"] == [], good
    # its own grading did not wait for the staller's section (which lasts the call's whole limit)
    assert good["seconds"] < STALL_S, good["seconds"]


def test_the_staller_loses_only_its_own_cell(graded):
    _, results = graded
    r = results["staller"]
    assert r["scores"][LAB] == {"test_add": 0.0, "test_scale": 3.0}, r


def test_the_memory_hog_loses_its_own_run_with_a_note_and_the_grader_survives(graded):
    cfg, results = graded
    r = results["hog"]
    assert any(f"memory bound of {BOUNDS.memory_mb} MB" in p for p in r["problems"]), r["problems"]
    assert r["bounds"]["oom_kills"] >= 1 and r["bounds"]["peak_mb"] <= BOUNDS.memory_mb + 1
    assert set(json.loads((cfg.out / "results" / f"{s}.json").read_text())["student"]
               for s in ("good", "staller", "hog", "filler")) == {"good", "staller", "hog", "filler"}


def test_the_disk_filler_stops_at_its_folders_size(graded):
    _, results = graded
    r = results["filler"]
    assert sum(f"filled its folder's {BOUNDS.disk_mb} MB" in p for p in r["problems"]) == 1, r["problems"]
    assert r["score"] == 5.0  # its code is right; the disk it filled was its own
