"""The Gradescope autograder of Lab 1, run in a local copy of Gradescope's directory tree, confined
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
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.export.gradescope import NEEDS_MB, SUBMISSION_CHECK, VISIBILITIES
from autograder.audit.mutants import make_submission
from autograder.pipeline import Config, grade_class
from emulate import gradescope as emulate

ROOT = Path(__file__).resolve().parents[3]
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
def harness(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gradescope")
    gs = emulate.Container(tmp, LAB, ROOT)
    root, archive = gs.root, gs.archive
    uploads = _submissions(tmp, root)
    before = _snapshot(root / "source")
    results, runs = {}, {}
    LEAK.unlink(missing_ok=True)
    for student, folder in uploads.items():
        results[student], runs[student] = gs.grade(folder, student)
    runs["leak"] = LEAK.read_text() if LEAK.exists() else None
    runs["source_changed"] = [str(p) for p, v in _snapshot(root / "source").items() if before.get(p) != v] + \
        [str(p) for p in before if not p.exists()]
    LEAK.unlink(missing_ok=True)
    local_subs = tmp / "local-submissions"
    for student, folder in uploads.items():
        shutil.copytree(folder, local_subs / student)
    local = {r["student"]: r for r in grade_class(Config(LAB, local_subs, tmp / "local", ROOT, workers=2),
                                                  progress=False)}
    return archive, results, local, tmp / "local", runs


def _snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}




def test_zip_has_gradescopes_layout(harness):
    archive, *_ = harness
    with zipfile.ZipFile(archive) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    for script in ("setup.sh", "run_autograder"):
        assert script in infos, "must be at the root of the zip, not in a folder"
        assert (infos[script].external_attr >> 16) & 0o111, f"{script} must be executable"
    assert any(n.startswith("course/autograder/checks/") for n in infos)
    # the zip states the Advanced Settings it needs, in its README and its setup.sh
    from autograder.export.gradescope import NEEDS_CPUS, NEEDS_TIMEOUT_MIN
    readme, setup = (zf_text(archive, n) for n in ("README.md", "setup.sh"))
    assert f"**{NEEDS_MB / 1024:g} GB or more**" in readme and f"**{NEEDS_TIMEOUT_MIN} minutes**" in readme
    assert f"**{NEEDS_CPUS:g} or more**" in readme
    assert f"memory {NEEDS_MB} MB or more, timeout {NEEDS_TIMEOUT_MIN} min" in setup and "@" not in setup
    assert f"course/solutions/{LAB}/" in {n[: len(f"course/solutions/{LAB}/")] for n in infos}
    # each lab's zip carries its own checks only, and no catalog of wrong solutions
    assert f"course/autograder/checks/{LAB}.py" in infos and "course/autograder/checks/lab2.py" not in infos
    assert not any("mutants" in n or n.startswith("course/autograder/audit") for n in infos)


def zf_text(archive: Path, name: str) -> str:
    with zipfile.ZipFile(archive) as zf:
        return zf.read(name).decode()


def test_a_zip_leaves_out_other_labs_checks():
    from autograder.export.gradescope import other_labs_file

    assert other_labs_file(ROOT, "lab1", Path("autograder/checks/lab2.py"))
    assert not other_labs_file(ROOT, "lab2", Path("autograder/checks/lab2.py"))
    assert other_labs_file(ROOT, "lab2", Path("autograder/checks/lab1_cases.py"))
    assert not other_labs_file(ROOT, "lab2", Path("autograder/checks/stats.py"))


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
    """Gradescope's leaderboard gets Lab 1's measured batch speed-up when its cell passed on a clear timing
    (a held timing has no place on it), and nothing from a submission that did not pass it."""
    _, results, *_ = harness
    for student, data in results.items():
        speed = next(t for t in data["tests"] if t["name"].endswith("[test_batch_speed]"))
        board = {row["name"]: row for row in data.get("leaderboard", [])}
        if speed["score"] == speed["max_score"]:
            row = board["Lab 1 batch speed-up"]
            assert row["order"] == "desc" and row["value"] > 1, student
        else:
            assert board == {}, student
    assert "leaderboard" not in results["empty"] and "leaderboard" not in results["broken"]
    assert results["hostile"]["score"] == 20.0 and len(results["hostile"]["tests"]) == len(LAB_ORDER) + 1


def test_no_sandbox_at_all_fails_closed_with_the_student_s_message(tmp_path, monkeypatch, capsys):
    """Neither bubblewrap nor uid mode (a grader without root): nothing is graded, the student reads that
    the grader could not start safely, the instructor's output says why."""
    from autograder.export import gradescope
    from autograder.sandbox import bwrap

    monkeypatch.setenv(bwrap.MODE_ENV, "uid")
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 1000)
    bwrap.capabilities.cache_clear()
    root = tmp_path / "autograder"
    (root / "source" / "course").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"lab": LAB, "visibility": "hidden"}))
    try:
        data = gradescope.run(root)
    finally:
        bwrap.capabilities.cache_clear()
    assert data["output"] == gradescope.NOT_GRADED and data["visibility"] == "visible"
    assert data["tests"][0]["name"] == SUBMISSION_CHECK and data["tests"][0]["visibility"] == "visible"
    assert "uid mode needs the grader to run as root" in data["extra_data"]["not_graded"]
    out = capsys.readouterr().out
    assert "NOT GRADED" in out and "uid mode needs the grader to run as root" in out


@pytest.mark.parametrize(("files", "want"), [
    ({"memory.max": "402653184\n"}, 384.0),  # cgroup v2, Gradescope's default 384 MB
    ({"memory.max": "max\n"}, None),
    ({"memory/memory.limit_in_bytes": "805306368\n"}, 768.0),  # cgroup v1
    ({"memory/memory.limit_in_bytes": "9223372036854771712\n"}, None),  # v1's "no limit"
    ({}, None),
])
def test_the_memory_limit_is_read_from_either_cgroup_version(tmp_path, files, want):
    from autograder.export.gradescope import memory_limit_mb

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert memory_limit_mb(tmp_path) == want


def test_a_container_below_the_memory_grading_needs_writes_a_clear_result_and_grades_nothing(tmp_path, monkeypatch,
                                                                                              capsys):
    """At Gradescope's default 384 MB the grader would be killed with no results.json; instead it says what to
    change (instructor's stdout) and tells the student, with no misleading score of their work."""
    from autograder.export import gradescope

    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "memory.max").write_text(str(384 * 2**20))
    monkeypatch.setenv(gradescope.CGROUP_ENV, str(cg))
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"lab": LAB, "visibility": "after_published",
                                                                 "needs_mb": gradescope.NEEDS_MB}))
    data = gradescope.run(root)
    assert [t["name"] for t in data["tests"]] == [SUBMISSION_CHECK] and data["visibility"] == "visible"
    assert data["tests"][0]["visibility"] == "visible" and data["tests"][0]["max_score"] == 0
    assert "could not start safely" in data["output"] and "instructor has been told" in data["output"]
    assert json.loads((root / "results" / "results.json").read_text()) == data
    out = capsys.readouterr().out
    assert "NOT GRADED" in out and "384 MB" in out and "Advanced Settings" in out
    (cg / "memory.max").write_text(str(2048 * 2**20))
    assert gradescope.too_small({"needs_mb": gradescope.NEEDS_MB}) is None


def test_the_pipeline_s_own_limits_end_grading_before_the_timeout_the_zip_asks_for():
    """Worst case by the pipeline's own limits (each lab's notebook limit, nbgrader then the clean re-check),
    plus the time to write results.json, fits inside the stop run_autograder sets, which fits the timeout."""
    from autograder.export import gradescope
    from autograder.pipeline import Config

    for lab in ("lab1", "lab2"):
        limits = Config(lab, ROOT, ROOT / "unused", ROOT).limits
        assert gradescope.worst_case_s(limits) + 30 <= gradescope.NEEDS_TIMEOUT_MIN * 60 - gradescope.STOP_BEFORE_S, lab
    assert "timeout --signal=TERM --kill-after=15 2040 " in gradescope.run_autograder_script()


@pytest.mark.parametrize(("grader", "why"), [
    ("kill -9 $$", "killed (exit 137"),  # what the kernel's OOM killer does to the grader
    ("sleep 30", "stopped at its time limit (2 s)"),
    ("exit 3", "exit status 3"),
])
def test_run_autograder_writes_results_json_whatever_ends_the_grader(tmp_path, grader, why):
    """A grader killed for memory, stopped at the time limit, or crashed before writing: results.json still
    tells the student, in Gradescope's format, and the instructor's output says what to change."""
    from autograder.export import gradescope

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{grader}\n")
    fake.chmod(0o755)
    (root / "source" / "python-path").write_text(str(fake))
    script = root / "run_autograder"
    script.write_text(gradescope.run_autograder_script(limit_s=2))
    script.chmod(0o755)
    env = {**os.environ, "SPECLAB_GRADESCOPE_ROOT": str(root)}
    proc = subprocess.run([str(script)], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    assert data["score"] == 0 and data["visibility"] == "visible" and "instructor has been told" in data["output"]
    assert data["tests"][0]["name"] == SUBMISSION_CHECK and data["tests"][0]["visibility"] == "visible"
    assert why in data["extra_data"]["not_graded"] and why in proc.stdout and "Advanced Settings" in proc.stdout


@pytest.mark.parametrize(("files", "want"), [
    ({"cpu.max": "25000 100000\n"}, 0.25),  # cgroup v2, Gradescope's default share
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2.0),  # cgroup v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({}, None),
])
def test_the_cpu_limit_is_read_and_below_one_cpu_the_instructor_is_warned(tmp_path, monkeypatch, files, want):
    from autograder.export import gradescope

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setenv(gradescope.CGROUP_ENV, str(tmp_path))
    assert gradescope.cpu_limit() == want
    warning = gradescope.cpu_warning({"needs_cpus": 1.0}, gradescope.cpu_limit())
    assert (warning is not None) == (want is not None and want < 1), warning
    if warning:
        assert "0.25 CPUs" in warning and "Advanced Settings" in warning and "4x longer" in warning


def test_the_guide_s_gradescope_section_matches_the_code(tmp_path, monkeypatch, capsys):
    """The settings the instructor guide asks for are the ones the zip checks, and each "NOT GRADED" message
    the guide tells the instructor to look for is what the grader prints in that case."""
    from autograder.export import gradescope
    from autograder.sandbox import bwrap

    guide = (ROOT / "autograder" / "README.md").read_text()
    section = guide[guide.index("## Gradescope"):guide.index("## The student edition")]
    assert f"**{gradescope.NEEDS_MB / 1024:g} GB or more**" in section
    assert f"**{gradescope.NEEDS_TIMEOUT_MIN} minutes**" in section
    assert f"**{gradescope.NEEDS_CPUS:g} CPU or more**" in section
    assert f"worst case is {gradescope.worst_case_s(Config(LAB, ROOT, ROOT, ROOT).limits) / 60:g} minutes" in section
    quoted = re.findall(r'"(NOT\s+GRADED: [^"]*)"', section)  # up to its first placeholder ("N MB", "...")
    wanted = {re.split(r" N MB|\.\.\.", " ".join(q.split()))[0].strip() for q in quoted} - {"NOT GRADED:"}
    assert len(wanted) == 3, wanted
    seen = []
    # the three cases, as the guide lists them: too little memory, no results.json, no sandbox
    cg = tmp_path / "cgroup"
    cg.mkdir()
    (cg / "memory.max").write_text(str(384 * 2**20))
    monkeypatch.setenv(gradescope.CGROUP_ENV, str(cg))
    root = tmp_path / "autograder"
    (root / "source" / "course").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"lab": LAB, "visibility": "hidden"}))
    gradescope.run(root)
    (cg / "memory.max").write_text("max\n")
    monkeypatch.setenv(bwrap.MODE_ENV, "uid")
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 1000)
    bwrap.capabilities.cache_clear()
    try:
        gradescope.run(root)
    finally:
        bwrap.capabilities.cache_clear()
    seen.append(capsys.readouterr().out)
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nkill -9 $$\n")
    fake.chmod(0o755)
    (root / "source" / "python-path").write_text(str(fake))
    (root / "run_autograder").write_text(gradescope.run_autograder_script(limit_s=5))
    (root / "run_autograder").chmod(0o755)
    (root / "results" / "results.json").unlink()
    seen.append(subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True, text=True, timeout=60,
                               env={**os.environ, "SPECLAB_GRADESCOPE_ROOT": str(root)}).stdout)
    for message in wanted:
        assert any(message.strip() in out for out in seen), (message, seen)
