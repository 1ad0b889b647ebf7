"""A tiny nbgrader course for the grading pipeline's tests, and hostile students for it.

Assignment `tiny`, notebook `tiny.ipynb`, written as any lab is: the MyST source
tests/support/tiny_lab/tiny.md and the checks module beside it, tiny.py (never mounted in a
sandbox nor shipped in a zip unless a run names it in `Config.lab_checks`). One solution cell
(add, scale), two graded test cells: `test_add` (2 points) and `test_scale` (3 points).
A student's notebook is the release notebook with the solution cell replaced, plus
optional extra cells (after the solution cell unless said otherwise).
"""
from __future__ import annotations

import copy
import shutil
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from autograder import checks

LAB = "tiny"
POINTS = {"test_add": 2.0, "test_scale": 3.0}
SOLUTION = "def add(a, b):\n    return a + b\n\n\ndef scale(v, c):\n    return np.asarray(v) * c\n"
HALF = "def add(a, b):\n    return a + b\n\n\ndef scale(v, c):\n    return v\n"  # test_add only

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parent / "tiny_lab"  # the lab's two halves: tiny.md and its checks, tiny.py
SOURCE_MD = TINY / "tiny.md"  # the lab, written as autograder/README.md says
LAB_CHECKS = (TINY,)  # Config.lab_checks of every run that grades tiny: its checks live outside the package
checks.add_folder(TINY)  # this process (the tests, the grader) imports them as autograder.checks.tiny
CONFIG = f"""\
import os
c = get_config()
c.CourseDirectory.course_id = "tiny"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.md"]
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# the kernels import the hidden checks (autograder.checks.tiny) from this repository and tests/support/tiny_lab
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [{str(REPO_ROOT)!r}, os.environ.get("PYTHONPATH")]))
os.environ["SPECLAB_LAB_CHECKS"] = {str(TINY)!r}
"""


def make_course(root: Path) -> Path:
    """A course whose one lab is tests/support/tiny_lab/tiny.md, built into its nbgrader notebook by
    autograder.authoring.labs (which reads the lab's CELLS from tiny.py, found through add_folder)."""
    from autograder.authoring import labs

    (root / "solutions" / LAB).mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(CONFIG)
    shutil.copyfile(SOURCE_MD, root / "solutions" / LAB / f"{LAB}.md")
    labs.build(LAB, root=root)
    return root


def memory_hog(processes: int) -> str:
    """A notebook cell that takes memory no per-process limit stops: `processes` processes of 100 MB each (every
    page touched), then up to 2 GB written to the RAM-backed /dev/shm (stopping quietly when it is full)."""
    return f'''
import subprocess as _sp, sys as _sys
_kids = [_sp.Popen([_sys.executable, "-c", "import time; x = bytearray(100 << 20); x[::4096] = b'1' * len(x[::4096]); "
                    "time.sleep(600)"]) for _ in range({processes})]
try:
    with open("/dev/shm/fill", "wb") as _f:
        for _ in range(40):
            _f.write(b"x" * (50 << 20))
except OSError:
    pass
'''


# A notebook cell that writes 16 MB files in its folder until the disk refuses.
DISK_FILLER = '''
try:
    for _i in range(1000):
        with open(f"fill{_i}", "wb") as _f:
            _f.write(b"x" * (16 << 20))
except OSError as _err:
    print("stopped:", _err)
'''


def variant_lab(base: Path, name: str, checks_source: str) -> tuple[Path, Path]:
    """A course at base/course whose one lab `name` is the tiny lab graded by other checks: the checks
    module `checks_source` (written to base/lab_checks/NAME.py and found through add_folder) and
    tiny.md importing it. (course root, lab checks folder): give the folder to Config.lab_checks."""
    from autograder.authoring import labs

    lab_checks = base / "lab_checks"
    lab_checks.mkdir(parents=True)
    (lab_checks / f"{name}.py").write_text(checks_source)
    checks.add_folder(lab_checks)
    course = base / "course"
    (course / "solutions" / name).mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(CONFIG.replace('"tiny"', repr(name))
                                               .replace(repr(str(TINY)), repr(str(lab_checks))))
    (course / "solutions" / name / f"{name}.md").write_text(
        SOURCE_MD.read_text().replace("import tiny as _checks", f"import {name} as _checks"))
    labs.build(name, root=course)
    return course, lab_checks


def student(release: nbformat.NotebookNode, solution: str | None = SOLUTION, before: list[str] = (),
            after: list[str] = (), end: list[str] = ()) -> nbformat.NotebookNode:
    """The release notebook with the solution filled in and extra cells around it."""
    nb = copy.deepcopy(release)
    cells = []
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "impl":
            cells += [new_code_cell(s) for s in before]
            if solution is not None:
                c.source = solution
            cells.append(c)
            cells += [new_code_cell(s) for s in after]
        else:
            cells.append(c)
    cells += [new_code_cell(s) for s in end]
    nb.cells = cells
    return nb


def write_variants(subs: Path, release: nbformat.NotebookNode, variants: dict) -> None:
    """One student folder per variant of the tiny lab under subs: variants maps a student to (what it
    handed in, ...), where what it handed in is a notebook, raw bytes, None (no notebook at all),
    "renamed" (the notebook under another name) or "extra" (the notebook and another one beside it)."""
    for name, (nb, *_) in variants.items():
        d = subs / name / LAB
        d.mkdir(parents=True)
        if isinstance(nb, bytes):
            (d / f"{LAB}.ipynb").write_bytes(nb)
        elif nb is None:
            (d / "README.txt").write_text("forgot the notebook")
        elif nb == "renamed":
            nbformat.write(student(release), d / f"{LAB} (1).ipynb")
        elif nb == "extra":
            nbformat.write(student(release), d / f"{LAB}.ipynb")
            nbformat.write(release, d / "scratch.ipynb")
        else:
            nbformat.write(nb, d / f"{LAB}.ipynb")
