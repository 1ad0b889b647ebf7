"""`autograder` ships with the package, and `speclab-grade` works from any folder.

The package is built into a wheel from a copy of the repository (no build isolation: the
venv's setuptools, nothing downloaded) and installed with `pip install --target` into a
folder that is not a course, so the command can only find the course through `--course`,
SPECLAB_COURSE or the working directory, and must say so when it has none of them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "_build", "grading", "dist", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    wheels = base / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(src)], check=True, capture_output=True, timeout=600)
    wheel = next(wheels.glob("speclab-*.whl"))
    target = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    return wheel, target


def _run(target: Path, args: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECLAB_COURSE")}
    clean.update(PYTHONPATH=str(target), **env)
    script = target / "bin" / "speclab-grade"
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=clean, capture_output=True, text=True,
                          timeout=900)


def test_wheel_holds_the_grader_and_its_command(installed):
    wheel, target = installed
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry = next(zf.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for needed in ("autograder/__init__.py", "autograder/pipeline/grade.py", "autograder/checks/lab1.py",
                   "autograder/audit/mutants/lab1_power.json", "autograder/inside/nbgrader_cmd.py",
                   "autograder/inside/harness.py", "autograder/sandbox/policy.py", "autograder/export/gradescope.py",
                   "autograder/pipeline/templates/speclab_feedback/index.html.j2", "autograder/README.md",
                   "speclab/weights/manifest.json"):
        assert needed in names, needed
    assert "speclab-grade = autograder.__main__:console" in entry
    assert (target / "bin" / "speclab-grade").exists()
    assert not any(n.startswith(("solutions/", "tests/")) for n in names)


def test_without_a_course_the_command_says_how_to_name_one(installed, tmp_path):
    _, target = installed
    proc = _run(target, ["lab1", str(tmp_path)], cwd=tmp_path)
    assert proc.returncode != 0
    assert "--course" in proc.stderr and "SPECLAB_COURSE" in proc.stderr, proc.stderr
    proc = _run(target, ["lab1", str(tmp_path), "--course", str(tmp_path)], cwd=tmp_path)
    assert proc.returncode != 0 and "not a speclab course folder" in proc.stderr, proc.stderr
    proc = _run(target, ["lab9", str(tmp_path), "--course", str(ROOT)], cwd=tmp_path)
    assert proc.returncode != 0 and "no lab 'lab9'" in proc.stderr, proc.stderr


def test_the_command_grades_from_another_folder(installed, tmp_path):
    _, target = installed
    subs = tmp_path / "subs"
    (subs / "zoe").mkdir(parents=True)
    (subs / "zoe" / "lab1.ipynb").write_text("{ not json")
    out = tmp_path / "out"
    proc = _run(target, ["lab1", str(subs), "--out", str(out), "--workers", "1"], cwd=tmp_path,
                SPECLAB_COURSE=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "results" / "zoe.json").read_text())
    assert result["score"] == 0 and "not a valid notebook" in result["problems"][0]
    assert "zoe" in proc.stdout and "SAWarning" not in proc.stderr
    assert (out / "feedback" / "zoe" / "lab1" / "lab1.html").exists()


def test_fast_nbgrader_command_runs_and_ignores_files_in_its_folder(tmp_path):
    """The grader's `nbgrader` (autograder/inside/nbgrader_cmd.py) works, skips rfc3987_syntax, and does not
    import modules from its working directory (a scratch course student code can write into)."""
    from autograder.inside.nbgrader_cmd import nbgrader_command

    (tmp_path / "nbgrader.py").write_text("raise SystemExit('imported from the working directory')\n")
    (tmp_path / "sitecustomize.py").write_text("raise SystemExit('imported from the working directory')\n")
    proc = subprocess.run([*nbgrader_command(), "--version"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "nbgrader version" in proc.stdout, proc.stdout + proc.stderr
    probe = nbgrader_command()[2].replace("from nbgrader.apps.nbgraderapp import main", "import nbformat") \
        .replace("sys.exit(main())", "print('rfc3987_syntax' in sys.modules and sys.modules['rfc3987_syntax'] is not None)")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr
