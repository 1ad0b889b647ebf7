"""The student edition (`make student-release`): what students need, and no answers.

The edition is built from the repository into tmp_path; the leak scan (the same one
`build_release` runs before it writes the zip) must find nothing in the folder or the zip, and
must find each kind of leak planted on purpose: a solution notebook, one reference-solution
line in a file of the package, a hidden-test import, and an instructor folder.
"""
from __future__ import annotations

import json
import shutil
import tomllib
import zipfile
from pathlib import Path

import pytest

from autograder.export.student_release import build_release, leaks, reference_lines

ROOT = Path(__file__).resolve().parents[3]
LABS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and any(p.glob(p.name + ".*")))


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    dest = tmp_path_factory.mktemp("dist") / "student"
    return build_release(ROOT, dest)


def test_edition_holds_the_labs_the_package_and_a_readme(edition):
    folder, archive = edition
    for lab in LABS:
        nb = json.loads((folder / "labs" / lab / f"{lab}.ipynb").read_text())
        assert nb["cells"], lab
        assert (folder / "labs" / lab / f"{lab}.ipynb").read_bytes() == (ROOT / "labs" / lab / f"{lab}.ipynb").read_bytes()
    assert (folder / "speclab" / "__init__.py").exists()
    assert list((folder / "speclab" / "weights").glob("*.safetensors")), "the checkpoints the labs load"
    readme = (folder / "README.md").read_text()
    for needed in ("pip install", "jupyter lab", "Hand in", f"labs/{LABS[0]}/{LABS[0]}.ipynb"):
        assert needed in readme, needed
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("jupyterlab") for d in project["optional-dependencies"]["student"])
    assert any(d.startswith("torch") for d in project["dependencies"])
    with zipfile.ZipFile(archive) as zf:
        names = {n.split("/", 1)[1] for n in zf.namelist()}
    assert names == {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_edition_has_nothing_from_solutions_or_the_hidden_checks(edition):
    folder, archive = edition
    assert leaks(folder, ROOT) == []
    assert leaks(archive, ROOT) == []
    with zipfile.ZipFile(archive) as zf:
        tops = {Path(n).parts[1] for n in zf.namelist()}
    assert tops == {"labs", "speclab", "README.md", "pyproject.toml"}


def test_reference_lines_are_found_in_the_sources():
    refs = reference_lines(ROOT)
    assert len(refs) > 20, "too few reference lines to make the scan meaningful"
    assert any("_checks.check_" in r for r in refs)  # hidden tests are covered too


@pytest.mark.parametrize("plant", ["solution_notebook", "reference_line", "hidden_import", "instructor_folder"])
def test_leak_scan_catches_a_planted_leak(edition, tmp_path, plant):
    folder, _ = edition
    copy = tmp_path / "student"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("*.safetensors"))
    lab = LABS[0]
    if plant == "solution_notebook":
        shutil.copyfile(ROOT / "labs" / lab / f"{lab}.ipynb", copy / "labs" / lab / "backup.ipynb")
        src = next((ROOT / "solutions" / lab).glob(f"{lab}.*"))
        shutil.copyfile(src, copy / "labs" / lab / f"{lab}{src.suffix}.bak")
    elif plant == "reference_line":
        line = sorted(r for r in reference_lines(ROOT) if "_checks" not in r)[0]
        with open(copy / "speclab" / "toy.py", "a") as f:
            f.write(f"\n#\n{line}\n")
    elif plant == "hidden_import":
        (copy / "speclab" / "helpers.py").write_text("from autograder.checks import lab1\n")
    else:
        (copy / "autograder").mkdir()
        (copy / "autograder" / "README.md").write_text("notes\n")
    found = leaks(copy, ROOT)
    assert found, plant
    # the zip is scanned the same way
    archive = tmp_path / "leaky.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in copy.rglob("*"):
            if f.is_file():
                zf.write(f, f"speclab-student/{f.relative_to(copy)}")
    assert leaks(archive, ROOT), plant


def test_build_refuses_a_course_whose_release_holds_answers(tmp_path):
    course = tmp_path / "course"
    for name in ("solutions", "speclab"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("*.safetensors", "__pycache__"))
    shutil.copyfile(ROOT / "pyproject.toml", course / "pyproject.toml")
    shutil.copyfile(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    lab = LABS[0]
    (course / "labs" / lab).mkdir(parents=True)
    # an instructor who copied the source notebook instead of running `make labs`
    src = ROOT / "solutions" / lab / f"{lab}.ipynb"
    if not src.exists():
        import jupytext

        jupytext.write(jupytext.read(ROOT / "solutions" / lab / f"{lab}.md"), course / "labs" / lab / f"{lab}.ipynb")
    else:
        shutil.copyfile(src, course / "labs" / lab / f"{lab}.ipynb")
    with pytest.raises(SystemExit, match="leak"):
        build_release(course, tmp_path / "dist" / "student")
    assert not (tmp_path / "dist" / "speclab-student.zip").exists()
