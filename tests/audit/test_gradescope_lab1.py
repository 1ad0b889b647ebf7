"""Audit `gradescope_lab1` (`make audit gradescope_lab1`): the Gradescope autograder of Lab 1, run in a local copy of Gradescope's directory tree, confined
as Gradescope's container is.

`make gradescope LAB=lab1`'s zip is unpacked into ROOT/source, `run_autograder` is copied to
ROOT/run_autograder, and `setup.sh` runs with SPECLAB_PYTHON set (its offline branch: nothing
is installed, this interpreter is used), ROOT standing in for /autograder through
SPECLAB_GRADESCOPE_ROOT. Then each submission is put in ROOT/submission and `run_autograder`
runs in ROOT, as Gradescope does: the reference solution, an empty submission, a broken one
(part 1 solved, part 2 a syntax error, the rest left as released) and a hostile one (the
reference, plus code that tries to forge results.json, read the reference solutions and change
the hidden checks).

Every step runs under Docker's default confinement as emulated by tests/support/emulate/gradescope.py
(the seccomp rules that refuse namespaces, Docker's 14 capabilities), with Ubuntu 22.04's
bubblewrap (0.6.1's options) as the bwrap on hand and, where this machine's cgroups allow, in a
memory cgroup at the limit the zip's README states (NEEDS_MB): no bubblewrap can start there,
so students run in uid mode. Each results.json must follow Gradescope's format and give, test by
test, the points the local pipeline (bubblewrap) gives the same notebook. `pytest -s` prints the
results.json files and the peak memory.
"""
from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.export.gradescope import NEEDS_MB, SUBMISSION_CHECK, VISIBILITIES
from autograder.audit.mutants import make_submission
from autograder.checks.lab1 import FIGURE, SPEEDUP_REQUIRED
from autograder.pipeline import Config, grade_class
from emulate import gradescope as emulate

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab1"
pytestmark = pytest.mark.slow
LAB_ORDER = [c["metadata"]["nbgrader"]["grade_id"]
             for c in json.loads((ROOT / "labs" / LAB / f"{LAB}.ipynb").read_text())["cells"]
             if c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"].get("solution")]


LEAK = Path("/tmp") / f"speclab-hostile-{os.getpid()}.txt"  # uid mode shares /tmp: the hostile code reports here


def _hostile(root: Path) -> str:
    """Code a hostile student puts before the reference in part 1's cell: it tries what uid mode must stop
    and writes what it managed to a file the test reads (uid mode has no private /tmp)."""
    return f"""
import os as _os
_tries = {{
    "forge results.json": lambda: open({str(root / "results" / "results.json")!r}, "w").write('{{"score": 1000.0}}'),
    "read the solutions": lambda: open({str(root / "source" / "course" / "solutions" / LAB / f"{LAB}.md")!r}).read(),
    "change the checks": lambda: open({str(root / "source" / "course" / "autograder" / "checks" / f"{LAB}.py")!r},
                                      "a").write("\\nFORGED = True\\n"),
    "list the grading output": lambda: _os.listdir({str(root / "work" / "grading")!r}),
    "read the gradebook template": lambda: open({str(root / "work" / "grading" / "template" / "gradebook.db")!r},
                                                "rb").read(10),
}}
for _what, _do in _tries.items():
    try:
        _got = _do()
        _line = f"DONE {{_what}}: {{str(_got)[:200]!r}}"
    except Exception as _err:
        _line = f"refused {{_what}}: {{type(_err).__name__}}"
    try:
        open({str(LEAK)!r}, "a").write(_line + "\\n")
    except OSError:
        pass
"""


def _submissions(tmp: Path, root: Path) -> dict[str, Path]:
    """student -> folder holding what that student uploads."""
    release = nbformat.read(ROOT / "labs" / LAB / f"{LAB}.ipynb", as_version=4)
    ref = make_submission(LAB, release)
    broken = nbformat.from_dict(json.loads(nbformat.writes(ref)))
    for cell in broken.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid == "impl_part2":
            cell.source = "def speculative_sample(p, q, rng):\n    return (\n"  # a syntax error
        elif gid.startswith("impl_part") and gid != "impl_part1":
            cell.source = next(c.source for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
    folders = {}
    hostile = nbformat.reads(nbformat.writes(ref), as_version=4)
    for cell in hostile.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "impl_part1":
            cell.source = _hostile(root) + "\n\n" + cell.source
    for student, nb in (("reference", ref), ("empty", None), ("broken", broken), ("hostile", hostile)):
        d = tmp / "uploads" / student
        d.mkdir(parents=True)
        if nb is not None:
            nbformat.write(nb, d / f"{LAB}.ipynb")
        folders[student] = d
    return folders


@pytest.fixture(scope="module")
def harness(tmp_path_factory, audit_grades):
    tmp = tmp_path_factory.mktemp("gradescope")
    gs = emulate.Container(tmp, LAB, ROOT)
    root, archive = gs.root, gs.archive
    uploads = _submissions(tmp, root)
    before = _snapshot(root / "source")
    results, runs = {}, {}
    LEAK.unlink(missing_ok=True)
    for student, folder in uploads.items():
        results[student], runs[student] = gs.grade(folder, student)
    audit_grades.figure("run_autograder_s", {s: r["wall_s"] for s, r in runs.items()})  # what each upload cost
    runs["leak"] = LEAK.read_text() if LEAK.exists() else None
    runs["source_changed"] = [str(p) for p, v in _snapshot(root / "source").items() if before.get(p) != v] + \
        [str(p) for p in before if not p.exists()]
    LEAK.unlink(missing_ok=True)
    local_subs = tmp / "local-submissions"
    for student, folder in uploads.items():
        shutil.copytree(folder, local_subs / student)
    local = {r["student"]: r for r in grade_class(Config(LAB, local_subs, tmp / "local", ROOT, workers=2),
                                                  progress=False)}
    for student, data in results.items():  # Gradescope's points per cell, against the local pipeline's
        got = {t["name"].rsplit("[", 1)[1].rstrip("]"): t["score"] for t in data["tests"][1:]}
        audit_grades.student(student, got, local[student]["scores"][LAB])
    return archive, results, local, tmp / "local", runs


def _snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def test_results_follow_gradescopes_format(harness):
    _, results, local, *_ = harness
    for student, data in results.items():
        assert isinstance(data["score"], float) and data["visibility"] in VISIBILITIES, student
        assert data["tests"], student
        check, *tests = data["tests"]
        assert check["name"] == SUBMISSION_CHECK and check["visibility"] == "visible" and check["max_score"] == 0
        assert data["output_format"] == "md" and data["extra_data"]["grader_version"], student
        for t in tests:
            assert set(t) >= {"name", "score", "max_score", "output", "visibility", "tags"}, t
            assert re.fullmatch(r"Part \d \[test_\w+\]", t["name"]), t["name"]  # short, the part and the cell
            assert t["tags"] == [f"part {t['name'][5]}"]
            assert 0 <= t["score"] <= t["max_score"] and t["visibility"] in VISIBILITIES
        assert sum(t["max_score"] for t in data["tests"]) == local[student]["max_score"] == 20
        assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]))


def test_results_equal_the_local_grades(harness):
    _, results, local, *_ = harness
    assert local["reference"]["score"] == 20 and local["empty"]["score"] == 0 and local["hostile"]["score"] == 20
    assert 0 < local["broken"]["score"] < 20
    for student, data in results.items():
        want = local[student]["scores"][LAB]
        got = {t["name"].rsplit("[", 1)[1].rstrip("]"): t["score"] for t in data["tests"][1:]}
        assert list(got) == LAB_ORDER, "tests in the lab's order"
        assert got == want, student
        assert data["score"] == local[student]["score"]


def test_students_read_why_but_not_the_hidden_tests(harness):
    _, results, *_ = harness
    broken = {t["name"].rsplit("[", 1)[1].rstrip("]"): t for t in results["broken"]["tests"][1:]}
    failed = [t for t in broken.values() if t["score"] < t["max_score"]]
    assert failed and all(t["output"].startswith("**Failed.**") for t in failed)
    assert any("NameError" in t["output"] or "NotImplementedError" in t["output"] for t in failed)
    assert "no notebook" in results["empty"]["output"]
    empty_check = results["empty"]["tests"][0]  # visible even when the scores are not
    assert empty_check["visibility"] == "visible" and "No notebook was found" in empty_check["output"]
    assert "received and graded" in results["reference"]["tests"][0]["output"]
    for data in results.values():
        text = json.dumps(data)
        assert "_checks" not in text and "BEGIN HIDDEN" not in text


def test_local_csv_in_lab_order_and_a_rerun_is_cheap_and_quiet(harness):
    """The same class graded locally: grades.csv's columns follow the lab; a second run grades
    nobody, rewrites no feedback page and no gradebook; a forced merge warns about nothing."""
    import csv
    import time
    import warnings

    _, _, local, out, _ = harness
    with open(out / "grades.csv") as f:
        header = next(csv.reader(f))
    assert header[4:-3] == [f"{LAB}:{g}" for g in LAB_ORDER] and header[-3:] == ["timing", "pending", "problems"]
    pages = {p: p.stat().st_mtime_ns for p in (out / "feedback").rglob("*.html")}
    assert len(pages) == 4
    db = (out / "gradebook.db").stat().st_mtime_ns
    cfg = Config(LAB, out.parent / "local-submissions", out, ROOT, workers=2)
    t0 = time.perf_counter()
    again = {r["student"]: r for r in grade_class(cfg, progress=False)}
    assert again == local
    assert {p: p.stat().st_mtime_ns for p in pages} == pages and (out / "gradebook.db").stat().st_mtime_ns == db
    print(f"\nre-run with everything graded: {time.perf_counter() - t0:.1f} s")
    (out / "merged.sha256").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grade_class(cfg, progress=False)
    assert not [w for w in caught if "sqlalchemy" in w.category.__module__.lower()], [str(w.message) for w in caught]
    assert (out / "gradebook.db").stat().st_mtime_ns != db  # the forced merge did write it


def test_gradescope_s_default_confinement_grades_in_uid_mode_within_the_stated_memory(harness):
    """No bubblewrap starts under Docker's default seccomp rules, whatever its release: every submission
    was graded in uid mode, the instructor's output and extra_data say so, and (where this machine can
    cap a cgroup's memory) no run went over NEEDS_MB or had a process killed for memory."""
    _, results, _, _, runs = harness
    for student, data in results.items():
        assert data["extra_data"]["sandbox_mode"].startswith("uid mode"), student
        assert "sandbox: uid mode" in runs[student]["stdout"], student
    if not emulate.can_limit_memory():
        pytest.skip("no writable memory cgroup on this machine: the memory limit was not applied")
    for student in results:
        assert runs[student]["oom_kills"] == 0 and runs[student]["peak_mb"] <= NEEDS_MB, (student, runs[student])
    assert results["reference"]["score"] == 20


def test_a_hostile_submission_cannot_forge_read_or_change_the_grader(harness):
    """The hostile notebook ran (its report exists) and every attempt was refused: results.json is the
    grader's, the reference solutions and the grading output stayed unreadable, the source tree unchanged."""
    _, results, _, _, runs = harness
    report = runs["leak"]
    assert report is not None, "the hostile code did not run"
    assert "DONE" not in report, report
    for what in ("forge results.json", "read the solutions", "change the checks", "list the grading output",
                 "read the gradebook template"):
        assert f"refused {what}" in report, what
    assert runs["source_changed"] == []


def test_the_leaderboard_holds_the_batch_speed_up_of_a_clear_pass_only(harness):
    """Gradescope's leaderboard gets Lab 1's measured batch speed when its cell passed on a clear timing
    (a held timing has no place on it), and nothing from a submission that did not pass it."""
    _, results, *_ = harness
    for student, data in results.items():
        speed = next(t for t in data["tests"] if t["name"].endswith("[test_batch_speed]"))
        board = {row["name"]: row for row in data.get("leaderboard", [])}
        if speed["score"] == speed["max_score"]:
            row = board[FIGURE]
            assert row["order"] == "desc" and row["value"] >= SPEEDUP_REQUIRED, student
        else:
            assert board == {}, student
    assert "leaderboard" not in results["empty"] and "leaderboard" not in results["broken"]
    assert results["hostile"]["score"] == 20.0 and len(results["hostile"]["tests"]) == len(LAB_ORDER) + 1


