"""The course installs as a package, and so does its student edition.

`autograder` ships with the package, and `speclab-grade` works from any folder: the package is
built into a wheel from a copy of the repository (no build isolation: the venv's setuptools,
nothing downloaded) and installed with `pip install --target` into a folder that is not a
course, so the command can only find the course through `--course`, SPECLAB_COURSE or the
working directory, and must say so when it has none of them.

The student edition (`make student-release`) is installed the way its README says,
`pip install -e ".[student]"`, into a fresh venv; its dependencies (torch, JupyterLab, ...)
come from this venv through a .pth file rather than from an index, so nothing is downloaded and
the course's own `speclab` stays out of sight. Both labs then run there from top to bottom, with
the reference solutions in place of the stubs: the edition's package, stripped of the graded
answers, is enough for every cell."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from load import scaled

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


# Runs a notebook with this venv's own python as its kernel (ipykernel's native kernel); argv: the notebook.
RUN_NOTEBOOK = """
import sys
import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=900, kernel_name="python3",
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, sys.argv[1])
"""


@pytest.fixture(scope="module")
def student_venv(tmp_path_factory):
    """(edition folder, python of a fresh venv holding the edition installed in editable mode)."""
    import sysconfig

    from autograder.export.student_release import build_release

    base = tmp_path_factory.mktemp("student")
    book = base / "speclab.pdf"
    book.write_bytes(b"%PDF-1.4\n% a stand-in for the book\n%%EOF\n")
    folder, _ = build_release(ROOT, base / "dist" / "student", book)
    venv = base / "venv"
    # no pip nor setuptools of its own (ensurepip's setuptools is older than the edition's build needs):
    # this venv's pip installs into it (--python), the build runs on this venv's setuptools
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                   timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # this venv's packages, as a plain path: its own .pth files (the course's editable speclab) are not run
    (Path(purelib) / "course_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                           "--no-build-isolation", "-e", f"{folder}[student]"], capture_output=True, text=True,
                          timeout=600, cwd=base)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return folder, python


def filled_notebook(folder: Path, lab: str) -> Path:
    """The edition's notebook of lab with every stub replaced by the reference solution's cell."""
    import nbformat

    from autograder.authoring.reference import reference_cells

    solved = dict(reference_cells(lab))
    path = folder / "labs" / lab / f"{lab}.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            assert meta["grade_id"] in solved, f"{lab}: no reference for the released cell {meta['grade_id']}"
            cell.source = solved[meta["grade_id"]]
    nb.cells.append(nbformat.v4.new_code_cell("import speclab\nprint('speclab from', speclab.__file__)"))
    out = path.with_name(f"{lab}_solved.ipynb")
    nbformat.write(nb, out)
    return out


@pytest.mark.parametrize("lab", ["lab1", "lab2"])
def test_every_cell_of_a_lab_runs_on_the_installed_edition(student_venv, lab):
    folder, python = student_venv
    notebook = filled_notebook(folder, lab)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECLAB_COURSE", "SPECLAB_DEFER_CHECKS")}
    # the labs' own switch for short sweeps (the grader sets it); JUPYTER_PATH: no kernel of another python
    env.update(NBGRADER_EXECUTION="autograde", MPLBACKEND="Agg", JUPYTER_PATH=str(python.parents[1] / "share" / "jupyter"),
               JUPYTER_DATA_DIR=str(folder.parent / "jupyter-data"))
    proc = subprocess.run([str(python), "-c", RUN_NOTEBOOK, str(notebook), str(notebook.parent)], cwd=notebook.parent,
                          env=env, capture_output=True, text=True, timeout=scaled(1200))
    assert proc.returncode == 0, proc.stderr[-4000:]
    outputs = [out for cell in json.loads(notebook.read_text())["cells"] for out in cell.get("outputs", [])]
    text = "\n".join(str(out.get("text", "")) for out in outputs)
    where = text[text.index("speclab from"):].split()[2]
    assert Path(where).resolve().is_relative_to(folder.resolve()), f"the kernel imported speclab from {where}"
    assert "IProgress not found" not in text
