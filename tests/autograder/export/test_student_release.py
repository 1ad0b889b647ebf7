"""The student edition (`make student-release`): what students need, and no answers.

The edition is built from the repository into tmp_path; the leak scan (the same one
`build_release` runs before it writes the zip) must find nothing in the folder or the zip, and
must find each kind of leak planted on purpose: a solution notebook, one reference-solution
line in a file of the package, a hidden-test import, an instructor folder, and a graded answer
defined in the package. The edition's speclab is the course's less the graded answers
(GRADED_ANSWERS): every module still imports without them, and, slower, no public function of
it passes a hidden check in place of a student's function (`answers_in`, which does find the
answers the course's own package holds). Its install instructions ask for a CPU build of torch
and name only extras its pyproject has; tests/end_to_end/test_install.py installs it and runs
both labs with it."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from autograder.export import student_release
from autograder.export.student_release import (ANSWER_NAMES, BOOK_ONLY, GRADED_ANSWERS, build_release, leaks,
                                                 reference_lines, strip_answers)
from load import scaled

ROOT = Path(__file__).resolve().parents[3]
LABS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and any(p.glob(p.name + ".*")))


STAND_IN_PDF = b"%PDF-1.4\n% a stand-in for the book that `make pdf` prints\n%%EOF\n"


def stand_in_book(folder: Path) -> Path:
    """A file that starts as a PDF does: the tests do not print the book (tests/book/test_pdf.py does)."""
    path = folder / "speclab.pdf"
    path.write_bytes(STAND_IN_PDF)
    return path


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    dest = tmp_path_factory.mktemp("dist") / "student"
    return build_release(ROOT, dest, stand_in_book(tmp_path_factory.mktemp("book")))


def test_edition_carries_the_book_and_says_where(edition):
    """Issue 51: the labs' "Chapters needed" link to the web; the edition carries the book so they open offline."""
    folder, archive = edition
    assert (folder / "book" / "speclab.pdf").read_bytes() == STAND_IN_PDF
    assert "`book/speclab.pdf`" in (folder / "README.md").read_text()
    with zipfile.ZipFile(archive) as zf:
        assert zf.read("speclab-student/book/speclab.pdf") == STAND_IN_PDF


@pytest.mark.parametrize("book", [None, "missing.pdf", "not_a_pdf.txt"])
def test_edition_refuses_to_be_built_without_the_book(tmp_path, book):
    """No PDF (none at the default place of a course without `make pdf`, a missing path, a file that is not a
    PDF): a message that says to run `make pdf`, and nothing written."""
    course = tmp_path / "course"
    (course / "labs" / "lab1").mkdir(parents=True)
    shutil.copyfile(ROOT / "labs" / "lab1" / "lab1.ipynb", course / "labs" / "lab1" / "lab1.ipynb")
    (tmp_path / "not_a_pdf.txt").write_text("hello")
    dest = tmp_path / "dist" / "student"
    with pytest.raises(SystemExit, match="make pdf"):
        build_release(course, dest, None if book is None else tmp_path / book)
    assert not dest.exists()


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
    assert any(d.startswith("ipywidgets") for d in project["optional-dependencies"]["student"]), \
        "without ipywidgets, tqdm's bars in JupyterLab warn 'IProgress not found'"
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
    assert tops == {"labs", "speclab", "book", "README.md", "pyproject.toml"}


def test_reference_lines_are_found_in_the_sources():
    refs = reference_lines(ROOT)
    assert len(refs) > 20, "too few reference lines to make the scan meaningful"
    assert any("_checks.check_" in r for r in refs)  # hidden tests are covered too


@pytest.mark.parametrize("plant", ["solution_notebook", "reference_line", "hidden_import", "instructor_folder",
                                   "graded_answer"])
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
    elif plant == "graded_answer":  # the answer moved to another module, under its own name
        (copy / "speclab" / "helpers.py").write_text(
            "def alpha_pooled(accepted, k):\n    return sum(accepted) / sum(min(a + 1, k) for a in accepted)\n")
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
        build_release(course, tmp_path / "dist" / "student", stand_in_book(tmp_path))
    assert not (tmp_path / "dist" / "speclab-student.zip").exists()


def pip_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if re.search(r"\bpip install\b", ln)]


def test_readme_installs_a_cpu_torch_first_and_names_the_cuda_way(edition):
    """On Linux, PyPI's torch is a CUDA build of several gigabytes: the README installs the CPU one
    before the package, so that pip finds torch already there, and says how to get CUDA instead."""
    readme = (edition[0] / "README.md").read_text()
    lines = pip_lines(readme)
    cpu = next(i for i, ln in enumerate(lines) if "torch" in ln and "download.pytorch.org/whl/cpu" in ln)
    package = next(i for i, ln in enumerate(lines) if '".[student]"' in ln)
    assert cpu < package, lines
    assert re.search(r"download\.pytorch\.org/whl/cu\d+", readme) and "CUDA" in readme


def extras_named(text: str) -> set[str]:
    """The extras of every `pip install -e ".[extra,...]"` in text."""
    groups = re.findall(r"pip install -e \\?\"\.\[([a-z_,]+)\]\\?\"", text)
    return {extra for group in groups for extra in group.split(",")}


def test_every_extra_the_edition_names_is_in_its_pyproject(edition):
    folder, _ = edition
    extras = set(tomllib.loads((folder / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = extras_named((folder / "README.md").read_text())
    for nb in sorted(folder.glob("labs/*/*.ipynb")):
        named |= extras_named("\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]))
    assert {"student", "hf"} <= named, named  # the README's install, Lab 2's optional real pair
    assert named <= extras, f"named but missing from the edition's pyproject: {sorted(named - extras)}"
    # the pattern reads both spellings, plain and JSON-escaped
    assert extras_named('pip install -e ".[student,hf]"; pip install -e \\".[gpu]\\"') == {"student", "hf", "gpu"}


IMPORT_ALL = """
import importlib, json, pkgutil, sys
sys.path = [p for p in sys.path if p not in ("", {root!r})]
sys.path.insert(0, {folder!r})
import speclab
assert speclab.__file__.startswith({folder!r}), speclab.__file__
present = {{}}
for info in pkgutil.iter_modules(speclab.__path__):
    if {only!r} and info.name not in {only!r}:
        continue
    module = importlib.import_module("speclab." + info.name)
    present[info.name] = sorted(n for n in {names!r} if hasattr(module, n))
print(json.dumps(present))
"""


def import_every_module(folder: Path, cwd: Path, only: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """module -> the graded answers it offers, for every module of folder/speclab (or those named in only)
    imported as `speclab`, in a process that cannot see the course's own package."""
    code = IMPORT_ALL.format(root=str(ROOT), folder=str(folder), names=sorted(ANSWER_NAMES), only=only)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=scaled(300))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_edition_package_imports_without_the_graded_answers(edition, tmp_path):
    folder, _ = edition
    present = import_every_module(folder, tmp_path)
    assert {"theory", "measure", "model", "sampling"} <= set(present), sorted(present)
    assert {m: names for m, names in present.items() if names} == {}
    for module in BOOK_ONLY:
        assert not (folder / "speclab" / module).exists(), module
    # the same import of the course's own package finds them, so the check above can fail
    course = tmp_path / "course"
    shutil.copytree(ROOT / "speclab", course / "speclab", ignore=shutil.ignore_patterns("__pycache__"))
    found = import_every_module(course, tmp_path, only=("theory", "measure"))
    assert set(found["theory"]) == set(GRADED_ANSWERS["theory.py"]) & ANSWER_NAMES
    assert set(found["measure"]) == set(GRADED_ANSWERS["measure.py"]) & ANSWER_NAMES


def test_strip_refuses_a_package_that_still_uses_an_answer_or_lacks_one(tmp_path, monkeypatch):
    def package() -> Path:
        dest = tmp_path / f"copy{len(list(tmp_path.iterdir()))}" / "speclab"
        shutil.copytree(ROOT / "speclab", dest, ignore=shutil.ignore_patterns("__pycache__", "*.safetensors",
                                                                             *BOOK_ONLY))
        return dest

    pkg = package()
    strip_answers(pkg)
    assert "def alpha_pooled" not in (pkg / "theory.py").read_text()
    assert "def alpha_per_draft" in (pkg / "theory.py").read_text()  # what is not listed stays
    pkg = package()
    with open(pkg / "toy.py", "a") as f:  # a module using an answer would break in the edition
        f.write("\n\ndef pooled(acc, k):\n    from speclab.theory import alpha_pooled\n    return alpha_pooled(acc, k)\n")
    with pytest.raises(SystemExit, match=r"toy.py:\d+ uses alpha_pooled"):
        strip_answers(pkg)
    monkeypatch.setitem(student_release.GRADED_ANSWERS, "theory.py", ("alpha_pooled", "alpha_pooled_v2"))
    with pytest.raises(SystemExit, match="out of date"):
        strip_answers(package())


def answers(package: Path, cwd: Path, labs: str, modules: str = "") -> list[str]:
    """student_release.answers_in run in a process of its own (it sets alarms and loads the checks);
    its notes (functions passing some checks of a student function only) are printed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECLAB_DEFER_CHECKS")}
    env.update(PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    code = ("import json, sys; from pathlib import Path; from autograder.export.student_release import answers_in\n"
            "notes = []\n"
            "found = answers_in(Path(sys.argv[1]), tuple(sys.argv[3].split(',')), "
            "tuple(sys.argv[4].split(',')) if sys.argv[4] else None, slack=float(sys.argv[2]), notes=notes)\n"
            "print(json.dumps([found, notes]))")
    proc = subprocess.run([sys.executable, "-c", code, str(package), str(scaled(1.0)), labs, modules], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=scaled(1500))
    assert proc.returncode == 0, proc.stderr[-3000:]
    found, notes = json.loads(proc.stdout.splitlines()[-1])
    print("\n".join(notes))
    return found


@pytest.mark.slow
def test_no_function_of_the_edition_passes_a_hidden_check(edition, tmp_path):
    """Every public function of the edition's speclab, in place of each student function of both labs:
    none passes all the hidden checks of that function (student_release.answers_in says which calls
    it makes; each has a time limit)."""
    assert answers(edition[0] / "speclab", tmp_path, ",".join(LABS)) == []


@pytest.mark.slow
def test_the_answer_scan_finds_the_answers_the_course_package_holds(tmp_path):
    found = answers(ROOT / "speclab", tmp_path, "lab2", "theory")
    assert any("theory.alpha_pooled passes as pooled_alpha" in f for f in found), found
    assert any("theory.speedup_measured passes as predicted_speedup" in f for f in found), found
