"""The grading pipeline on a tiny nbgrader lab: broken and hostile students get exactly their points.

Lab `tiny` (tests/grading_fixtures.py): test_add 2 points, test_scale 3 points (hidden
tests use numpy and scipy.stats). A correct solution earns 5, HALF (scale wrong) earns 2,
the untouched release 0. Every student below is graded in ONE pipeline run with 2 workers
and short limits (5 s per cell, 40 s per notebook); each test asserts the final score
and the line its problem gets in the summary/feedback, so a student that slipped
through, crashed the run or cost another student points fails here.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import zipfile

import nbformat
import pytest
from nbformat.v4 import new_markdown_cell

import grading_fixtures as F
from released import seed_template  # one release of a lab per test process (tests/support/released.py)
from autograder.pipeline import Config, build_template, grade_class, normalise, summary
from autograder.sandbox import Limits, capabilities
from load import scaled

pytestmark = pytest.mark.slow
LIMITS = Limits(cell_timeout_s=scaled(5), notebook_timeout_s=scaled(40), memory_mb=3072, file_mb=200, output_kb=64)
FULL, HALF_PTS = 5.0, 2.0
SEGV = "import ctypes\nctypes.string_at(0)"
PATCH_ALL = ("import scipy.stats\nnp.array_equal = lambda *a, **k: True\nnp.sum = lambda *a, **k: 1.5\n"
             "class _D:\n    mean = -4.5\n\n\nscipy.stats.describe = lambda *a, **k: _D()")


def _idx(nb, gid):
    return [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == gid][0]


def _variants(rel):
    """student -> (notebook or bytes or None, expected score, expected problem text or '')."""
    import copy

    out = {
        "good": (F.student(rel), FULL, ""),
        "half": (F.student(rel, F.HALF), HALF_PTS, "test_scale: AssertionError"),
        "blank": (rel, 0.0, "test_add: NameError"),
        "infinite_loop": (F.student(rel, after=["while True:\n    pass"]), FULL, "interrupted at the cell time limit"),
        "sleeps_every_cell": (F.student(rel, "import time\ntime.sleep(3600)\n" + F.SOLUTION,
                                        before=["import time\ntime.sleep(3600)"], after=["time.sleep(3600)"]),
                              0.0, "interrupted at the cell time limit"),
        "memory_blowup": (F.student(rel, after=["big = np.ones((10**6, 10**5))"]), FULL, "MemoryError"),
        "exit_after_tests": (F.student(rel, end=["import os\nos._exit(1)"]), FULL, "kernel died"),
        "segfault_before_tests": (F.student(rel, after=[SEGV]), 0.0, "kernel died"),
        "error_at_import": (F.student(rel, before=["import no_such_module_xyz"]), FULL, "ModuleNotFoundError"),
        # 2 GB printed from one 1 MB string: the cost is the printing, not 2000 allocations
        # (allocating each line afresh took more than the 5 s cell limit on a loaded CI machine)
        "gigabytes_printed": (F.student(rel, after=["line = 'x' * 10**6\nfor _ in range(2000):\n    print(line)"]),
                              FULL, ""),
        "hides_tracebacks": (F.student(rel, F.HALF, after=[
            "ip = get_ipython()\nip.showtraceback = lambda *a, **k: None\n"
            "ip._showtraceback = lambda *a, **k: None\nimport sys\nsys.excepthook = lambda *a: None"]),
            HALF_PTS, "test_scale"),
        "patches_numpy_scipy": (F.student(rel, F.HALF, after=[PATCH_ALL]), HALF_PTS, "test_scale: AssertionError"),
        "vandal": (F.student(rel, after=["import os, shutil\nshutil.rmtree('../../../submitted', ignore_errors=True)\n"
                                         "open('../../../gradebook.db', 'w').write('junk')"]), FULL, "gradebook"),
        "invalid_json": (b'{"cells": [', 0.0, "not a valid notebook"),
        "missing_notebook": (None, 0.0, "missing"),
        "renamed": ("renamed", FULL, "graded the only notebook"),
        "extra_notebook": ("extra", FULL, "extra notebook"),
    }
    nb = F.student(rel)
    del nb.cells[_idx(nb, "test_scale")]
    out["test_deleted"] = (nb, FULL, "test_scale: deleted")
    nb = F.student(rel)
    nb.cells[_idx(nb, "test_scale")].source = "assert True"
    out["test_edited"] = (nb, FULL, "test_scale: edited")
    nb = F.student(rel, F.HALF)
    nb.cells[_idx(nb, "test_scale")].source = "pass"
    out["test_edited_to_pass"] = (nb, HALF_PTS, "test_scale: edited")
    nb = F.student(rel)
    dup = copy.deepcopy(nb.cells[_idx(nb, "test_add")])
    dup.id = "test-add-copy"  # the grade id is what is duplicated here (a cell id twice: `duplicate_ids`)
    nb.cells.append(dup)
    out["test_duplicated"] = (nb, FULL, "test_add: duplicated")
    nb = F.student(rel)
    nb.cells.insert(1, nb.cells.pop(_idx(nb, "test_add")))
    out["test_moved"] = (nb, FULL, "moved")
    nb = F.student(rel)
    i = _idx(nb, "test_scale")
    md = new_markdown_cell(nb.cells[i].source, metadata=nb.cells[i].metadata)
    md.id = nb.cells[i].id
    nb.cells[i] = md
    out["test_to_markdown"] = (nb, FULL, "turned into markdown")
    raw = json.loads(nbformat.writes(F.student(rel)))
    raw["cells"][-1]["id"] = raw["cells"][-2]["id"]
    out["duplicate_ids"] = (json.dumps(raw).encode(), FULL, "duplicated cell ids")  # nbformat.write would fix them
    nb = F.student(rel)
    for c in nb.cells:
        c.metadata.pop("nbgrader", None)
    out["no_metadata"] = (nb, FULL, "no nbgrader metadata")
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading")
    course = F.make_course(base / "course")
    subs = base / "subs"
    cfg = Config(F.LAB, subs, base / "out", course, workers=2, limits=LIMITS, lab_checks=F.LAB_CHECKS)
    seed_template(cfg)
    build_template(cfg)
    rel = nbformat.read(cfg.out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    variants = _variants(rel)
    F.write_variants(subs, rel, variants)
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    return cfg, variants, results


STUDENTS = ["good", "half", "blank", "infinite_loop", "sleeps_every_cell", "memory_blowup", "exit_after_tests",
            "segfault_before_tests", "error_at_import", "gigabytes_printed", "hides_tracebacks",
            "patches_numpy_scipy", "vandal", "invalid_json", "missing_notebook", "renamed", "extra_notebook",
            "test_deleted", "test_edited", "test_edited_to_pass", "test_duplicated", "test_moved",
            "test_to_markdown", "duplicate_ids", "no_metadata"]


@pytest.mark.parametrize("student", STUDENTS)
def test_student_gets_exactly_its_points(graded, student):
    cfg, variants, results = graded
    _, want, problem = variants[student]
    r = results[student]
    assert r["score"] == want, (student, r)
    if problem:
        assert any(problem in p for p in r["problems"]), r["problems"]
        html = (cfg.out / "feedback" / student / F.LAB / "tiny.html")
        if html.exists():  # students with no notebook at all have no feedback page
            assert problem in html.read_text()
        assert problem in summary(cfg, build_template(cfg), list(results.values()))
    else:
        assert r["problems"] == [], r["problems"]


def test_every_student_listed(graded):
    assert set(STUDENTS) == set(graded[1])


def test_csv_and_gradebook_match_results(graded):
    cfg, _, results = graded
    with open(cfg.out / "grades.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(results)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{cfg.out / 'gradebook.db'}") as gb:
        for s, r in results.items():
            assert float(rows[s]["score"]) == r["score"]
            assert float(rows[s]["tiny:test_add"]) + float(rows[s]["tiny:test_scale"]) == r["score"]
            assert gb.find_submission(F.LAB, s).score == pytest.approx(r["score"])


def test_gigabytes_of_output_are_capped(graded):
    cfg, _, _ = graded
    nb = cfg.out / "autograded" / "gigabytes_printed" / F.LAB / "tiny.ipynb"
    assert nb.stat().st_size < 2 * 2**20
    assert "output beyond 64 kB dropped" in nb.read_text()


def test_graded_in_the_sandbox(graded):
    assert capabilities().ok, capabilities().missing


def test_rerun_is_idempotent_and_serial_equals_parallel(graded):
    cfg, _, results = graded
    before = {p.name: p.stat().st_mtime_ns for p in (cfg.out / "results").glob("*.json")}
    again = {r["student"]: r for r in grade_class(cfg, progress=False)}  # nothing to do
    assert {p.name: p.stat().st_mtime_ns for p in (cfg.out / "results").glob("*.json")} == before
    assert again == results
    only = ("half", "patches_numpy_scipy", "test_moved")
    serial = Config(cfg.lab, cfg.submissions, cfg.out, cfg.course_root, workers=1, force=True, only=only,
                    limits=LIMITS, lab_checks=F.LAB_CHECKS)
    redo = {r["student"]: r for r in grade_class(serial, progress=False)}
    for s in only:
        assert (redo[s]["scores"], redo[s]["problems"]) == (results[s]["scores"], results[s]["problems"])


def test_resume_grades_only_the_missing_student(graded):
    cfg, _, results = graded
    (cfg.out / "results" / "half.json").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in (cfg.out / "results").glob("*.json")}
    again = {r["student"]: r for r in grade_class(cfg, progress=False)}
    after = {p.name: p.stat().st_mtime_ns for p in (cfg.out / "results").glob("*.json")}
    assert {k: v for k, v in after.items() if k != "half.json"} == before
    assert again["half"]["score"] == HALF_PTS


def test_zip_of_flat_lms_files(tmp_path, graded):
    cfg, _, _ = graded
    rel = nbformat.read(cfg.out / "template" / "labs" / F.LAB / "tiny.ipynb", as_version=4)
    zpath = tmp_path / "download.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("alice__tiny.ipynb", nbformat.writes(F.student(rel)))
        z.writestr("bob__tiny.ipynb", nbformat.writes(F.student(rel, F.HALF)))
        z.writestr("../evil__tiny.ipynb", "{}")
    out = tmp_path / "out"
    shutil.copytree(cfg.out / "template", out / "template", symlinks=True)
    res = grade_class(Config(F.LAB, zpath, out, cfg.course_root, workers=2, limits=LIMITS, lab_checks=F.LAB_CHECKS),
                      progress=False)
    assert {r["student"]: r["score"] for r in res} == {"alice": FULL, "bob": HALF_PTS}


@pytest.mark.parametrize("what", ["deleted", "moved", "edited"])
def test_normalise_restores_the_release_skeleton(graded, what):
    cfg, _, _ = graded
    rel = json.loads((cfg.out / "template" / "labs" / F.LAB / "tiny.ipynb").read_text())
    nb = json.loads(nbformat.writes(F.student(nbformat.from_dict(rel), after=["x = 1"])))
    i = [k for k, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_add"][0]
    if what == "deleted":
        del nb["cells"][i]
    elif what == "moved":
        nb["cells"].insert(0, nb["cells"].pop(i))
    else:
        nb["cells"][i]["source"] = "assert True"
    fixed, lines = normalise(nb, rel)
    gids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in fixed["cells"]]
    assert gids == ["intro", "setup", "impl", None, "test_add", "test_scale"]
    assert fixed["cells"][4]["source"] == [c for c in rel["cells"] if c["id"] == "test_add"][0]["source"]
    assert "".join(fixed["cells"][3]["source"]) == "x = 1"
    assert len(lines) == 1 and what in lines[0]


# ----------------------------------------------------------------------------- messages and timings, whole way
# A lab like tiny whose scale check also "times": it calls timing.undecided for a scale that does not halve
# [2.0] at c = 0.5 (HALF's), as a timed check does when its sign test cannot decide, and fails such a scale
# with a message of some 5000 characters. Written here under a name of its own (tinytimed), so that it
# never meets the tiny lab's module in this process.
TIMED_LAB = "tinytimed"
TIMED_NOTE = "no clear verdict after 7 paired rounds (median 1.9x against the 2x bar)"
TIMED_CHECKS = f'''
import numpy as np

from . import CellSpec, Rule, defer_to_grader, timing

R_ADD = Rule("add", "`add(a, b)` returns a + b.")
R_SCALE = Rule("scale", "`scale(v, c)` returns the array v times c.")
R_SPEED = Rule("scale speed", "`scale` is timed against a loop; a timing that cannot decide costs nothing.")


def check_add(add):
    """add(a, b) returns a + b."""
    got = add(-4, 2.5)
    assert got == -1.5, f"add(-4, 2.5): expected -1.5, got {{got}}"


def check_scale(scale):
    """scale(v, c) returns the array v times c."""
    if not np.array_equal(scale(np.array([2.0]), 0.5), [1.0]):
        timing.undecided({TIMED_NOTE!r})
    got = np.ravel(scale(np.arange(300), -3))
    assert np.array_equal(got, np.arange(300) * -3), "scale(np.arange(300), -3) differs from v * c. " + "; ".join(
        f"entry {{i}}: expected {{-3 * i}}, got {{g}}" for i, g in enumerate(got))


CELLS = [CellSpec("test_add", 1, 2, check_add, ("add",), rules=(R_ADD,)),
         # judged after the class's other checks, one student at a time
         CellSpec("test_scale", 1, 3, check_scale, ("scale",), rules=(R_SCALE, R_SPEED), timed=True)]

defer_to_grader(globals())
'''


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    base = tmp_path_factory.mktemp("timed")
    course, lab_checks = F.variant_lab(base, TIMED_LAB, TIMED_CHECKS)
    cfg = Config(TIMED_LAB, base / "subs", base / "out", course, workers=2, limits=LIMITS, lab_checks=(lab_checks,))
    build_template(cfg)
    rel = nbformat.read(cfg.out / "template" / "labs" / TIMED_LAB / f"{TIMED_LAB}.ipynb", as_version=4)
    for student, solution in (("clear", F.SOLUTION), ("unclear", F.HALF), ("held", RIGHT_BUT_UNCLEAR)):
        d = base / "subs" / student / TIMED_LAB
        d.mkdir(parents=True)
        nbformat.write(F.student(rel, solution), d / f"{TIMED_LAB}.ipynb")
    d = base / "subs" / "crashed" / TIMED_LAB  # right, but its kernel dies after the tests: nbgrader gives up
    d.mkdir(parents=True)
    nbformat.write(F.student(rel, end=[CRASH]), d / f"{TIMED_LAB}.ipynb")
    results = {r["student"]: r for r in grade_class(cfg, progress=False)}
    return cfg, results, None


# right on every value the cell asserts, but its timing (the one-element case) never decides: the cell passes
RIGHT_BUT_UNCLEAR = F.SOLUTION.replace("return np.asarray(v) * c", "return np.asarray(v) * (c if np.size(v) > 1 else 1)")


CRASH = "import os\nos._exit(3)"


def written(cfg) -> dict[str, int]:
    """student -> when its result file was last written (ns)."""
    return {p.stem: p.stat().st_mtime_ns for p in (cfg.out / "results").glob("*.json")}


def test_an_undecided_timing_reaches_the_csv_the_summary_and_the_page(timed):
    cfg, results, _ = timed
    assert (results["clear"]["score"], results["unclear"]["score"]) == (FULL, HALF_PTS)  # undecided: no points taken
    assert results["unclear"]["timing"] == {TIMED_LAB: {"test_scale": [TIMED_NOTE]}}
    assert not results["clear"]["timing"] and results["clear"]["problems"] == []
    with open(cfg.out / "grades.csv") as f:
        assert {row["student"]: row["timing"] for row in csv.DictReader(f)} == {
            "clear": "", "unclear": "test_scale: undecided", "held": "test_scale: undecided", "crashed": ""}
    text = summary(cfg, build_template(cfg), list(results.values()))
    assert f"  unclear: {TIMED_LAB}.ipynb test_scale: {TIMED_NOTE}" in text.splitlines()
    assert "clear:" not in text.replace("unclear:", "")
    page = (cfg.out / "feedback" / "unclear" / TIMED_LAB / f"{TIMED_LAB}.html").read_text()
    row = page[page.index('href="#test_scale"'):]
    assert TIMED_NOTE in row[:row.index("</tr>")]  # in the cell's row
    assert TIMED_NOTE not in (cfg.out / "feedback" / "clear" / TIMED_LAB / f"{TIMED_LAB}.html").read_text()


def test_an_unclear_timing_is_held_never_awarded(timed):
    """A timed cell is judged after the class's other checks, one student at a time; a timing without a clear
    verdict has its points held (0 in the score, listed as pending) until --retime, which times only the held
    students' cells."""
    cfg, results, _ = timed
    held = results["held"]
    assert held["score"] == FULL - 3 and held["pending"] == {TIMED_LAB: {"test_scale": 3.0}}
    assert held["scores"][TIMED_LAB]["test_scale"] == 0.0
    note = next(p for p in held["problems"] if "timing pending:" in p)
    assert "--retime --student held" in note and "3 points held back" in note
    assert "pending" not in results["unclear"] and "pending" not in results["clear"]
    # timed once more, alone, at the end of the class run, before its points were held; the others once
    assert {s: r.get("timed_runs") for s, r in results.items()} == {"held": 2, "unclear": 1, "clear": 1,
                                                                     "crashed": 1}
    with open(cfg.out / "grades.csv") as f:
        assert {row["student"]: (row["score"], row["pending"]) for row in csv.DictReader(f)} == {
            "clear": (f"{FULL:g}", ""), "unclear": (f"{HALF_PTS:g}", ""), "held": (f"{FULL - 3:g}", "3"),
            "crashed": (f"{FULL:g}", "")}
    text = summary(cfg, build_template(cfg), list(results.values()))
    assert "PENDING: 3 points of 1 student held back" in text and f"{TIMED_LAB} {cfg.submissions} --retime" in text
    page = (cfg.out / "feedback" / "held" / TIMED_LAB / f"{TIMED_LAB}.html").read_text()
    row = page[page.index('href="#test_scale"'):]
    assert "timing pending:" in row[:row.index("</tr>")]

    again = dataclasses.replace(cfg, retime=True)
    before = written(cfg)
    after = {r["student"]: r for r in grade_class(again, progress=False)}
    changed = {s for s, t in written(cfg).items() if t != before.get(s)}
    assert changed == {"held"}  # only the held student's result is timed again and rewritten
    assert after["held"]["pending"] == held["pending"] and after["held"]["score"] == held["score"]
    assert after["held"]["timed_runs"] == 4  # --retime times it, and once more while it stays unclear
    assert after["clear"] == results["clear"]

    # Gradescope's one timing (its timeout has no room for a second): held after one. In this process, as
    # Gradescope grades (the grader process of a class run finds the lab's checks the same way)
    from autograder.checks import add_folder
    from autograder.export import gradescope
    from autograder.pipeline.collect import collect
    from autograder.pipeline.grade import grade_student

    for extra in cfg.lab_checks:
        add_folder(extra)
    folder = collect(cfg.submissions, cfg.lab, cfg.out)["held"]
    once = grade_student(cfg, build_template(cfg), "held", folder, 0, attempts=gradescope.TIMING_ONCE)
    assert once["timed_runs"] == 1 and once["pending"] == held["pending"]


def test_a_notebook_nbgrader_could_not_finish_still_has_its_timed_cell_timed(timed):
    """Its kernel died after the tests, so nbgrader gave up on it: the untimed cells that passed their second
    opinion count, and the timed cell is timed like anyone's (here a clear pass), never 0 for want of a timing."""
    _, results, _ = timed
    r = results["crashed"]
    assert r["scores"][TIMED_LAB] == {"test_add": 2.0, "test_scale": 3.0} and r["timed_runs"] == 1, r
    note = next(p for p in r["problems"] if "the kernel died" in p)
    assert "timed after the class's other checks" in note and "test_scale" in note, note
    assert "pending" not in r and not r.get("timing")


def test_the_hidden_checks_long_message_reaches_the_page_whole(timed):
    cfg, results, _ = timed
    page = (cfg.out / "feedback" / "unclear" / TIMED_LAB / f"{TIMED_LAB}.html").read_text()
    cell = page[page.index('id="test_scale"'):]
    cell = cell[:cell.index("</div></div>")]
    assert "scale(np.arange(300), -3) differs from v * c." in cell.split("<details>")[0]  # in view
    assert "entry 299: expected -897, got 299" in cell.split("<details>", 1)[1]  # the detail, folded, not dropped
    assert any(len(p) > 5000 for p in results["unclear"]["problems"])
