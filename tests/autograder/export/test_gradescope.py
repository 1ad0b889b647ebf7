"""The Gradescope export's parts that need no class graded: what goes in a lab's zip, the limits it reads
from its container, and `run_autograder` writing a results.json whatever ends the grader.

The zip graded end to end in an emulated Gradescope container (tests/support/emulate/gradescope.py), Lab 1's
reference, empty, broken and hostile uploads against the local pipeline's grades, is the `gradescope_lab1`
audit (tests/audit/test_gradescope_lab1.py, `make audit gradescope_lab1`); Lab 2's reference is
`gradescope_lab2`.
"""
from __future__ import annotations

import json
import re
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from autograder.export.gradescope import NEEDS_MB, build_zip, SUBMISSION_CHECK
from autograder.pipeline import Config

ROOT = Path(__file__).resolve().parents[3]
LAB = "lab1"
pytestmark = pytest.mark.slow


def test_zip_has_gradescopes_layout(tmp_path):
    archive = build_zip(ROOT, LAB, tmp_path / f"gradescope-{LAB}.zip")
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


def test_no_sandbox_at_all_fails_closed_with_the_student_s_message(tmp_path, monkeypatch, capsys):
    """Neither bubblewrap nor uid mode (a grader without root): nothing is graded, the student reads that
    the grader could not start safely, the instructor's output says why."""
    from autograder.export import gradescope
    from autograder.sandbox import bwrap

    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 1000)
    bwrap.capabilities.cache_clear()
    root = tmp_path / "autograder"
    (root / "source" / "course").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"lab": LAB, "visibility": "hidden"}))
    try:
        data = gradescope.run(root, sandbox_mode="uid")  # $SPECLAB_SANDBOX, as `main` reads it
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
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"lab": LAB, "visibility": "after_published",
                                                                 "needs_mb": gradescope.NEEDS_MB}))
    data = gradescope.run(root, cgroup_root=cg)  # $SPECLAB_CGROUP_ROOT, as `main` reads it
    assert [t["name"] for t in data["tests"]] == [SUBMISSION_CHECK] and data["visibility"] == "visible"
    assert data["tests"][0]["visibility"] == "visible" and data["tests"][0]["max_score"] == 0
    assert "could not start safely" in data["output"] and "instructor has been told" in data["output"]
    assert json.loads((root / "results" / "results.json").read_text()) == data
    out = capsys.readouterr().out
    assert "NOT GRADED" in out and "384 MB" in out and "Advanced Settings" in out
    (cg / "memory.max").write_text(str(2048 * 2**20))
    assert gradescope.too_small({"needs_mb": gradescope.NEEDS_MB}, cg) is None


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
def test_the_cpu_limit_is_read_and_below_one_cpu_the_instructor_is_warned(tmp_path, files, want):
    from autograder.export import gradescope

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert gradescope.cpu_limit(tmp_path) == want
    warning = gradescope.cpu_warning({"needs_cpus": 1.0}, gradescope.cpu_limit(tmp_path))
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
    root = tmp_path / "autograder"
    (root / "source" / "course").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"lab": LAB, "visibility": "hidden"}))
    gradescope.run(root, cgroup_root=cg)
    (cg / "memory.max").write_text("max\n")
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 1000)
    bwrap.capabilities.cache_clear()
    try:
        gradescope.run(root, sandbox_mode="uid", cgroup_root=cg)
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


def test_the_container_grades_one_submission_unstretched_and_timed_once(tmp_path):
    """One submission per container: its limits count wall time (stretch 0: the worst case above holds) and
    its timed cells are timed once, through the run's Config; the clock's own default, which the sandbox's
    timers keep, is left as it is."""
    from autograder.export import gradescope
    from autograder.inside import clock

    cfg = gradescope._config(tmp_path, LAB, "uid", "/opt/bwrap")
    assert (cfg.stretch, cfg.timing_attempts) == (0.0, gradescope.TIMING_ONCE)
    assert (cfg.sandbox_mode, cfg.bwrap) == ("uid", "/opt/bwrap")
    assert clock.STRETCH == 2.0 and not hasattr(gradescope, "PYTHON_ENV")
