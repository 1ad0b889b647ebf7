"""A throw-away nbgrader course that runs the REAL nbgrader commands (tests import it by name).

`make_course(root)` makes root a course that uses the repository's configuration
(autograder/inside/nbgrader_config.py) and solutions/, through the pipeline's one helper for such
courses (autograder.pipeline.config.write_course), but writes its release, submissions, autograded
notebooks and gradebook under root only. Submissions are added as notebooks; `autograde` runs
`nbgrader autograde` as a subprocess; `scores` reads the gradebook.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from load import cpu_of_children, scaled

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: nbgrader, and alembic which the gradebook needs


@dataclass(frozen=True)
class Cost:
    wall_s: float
    cpu_s: float  # what a budget is checked on: it does not grow with other processes' load

    def __str__(self) -> str:
        return f"{self.wall_s:.1f} s wall, {self.cpu_s:.1f} s CPU"


@dataclass
class NbgraderCourse:
    root: Path

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """One nbgrader command; `timeout` is sized for a quiet machine and scaled by tests/load.py."""
        env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=scaled(timeout))
        if proc.returncode != 0:
            raise AssertionError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc

    def generate(self, lab: str) -> Path:
        """`nbgrader generate_assignment`: the student version, and the lab in this course's gradebook."""
        self.run("generate_assignment", lab, "--force")
        return self.root / "labs" / lab

    def add_submission(self, student: str, lab: str, nb: nbformat.NotebookNode, name: str | None = None) -> Path:
        path = self.root / "submitted" / student / lab / f"{name or lab}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
        return path

    def autograde(self, lab: str, student: str = "*", exclude: str = "", timeout: float = 600) -> Cost:
        """Run `nbgrader autograde` once for the students matching `student` (a glob) except the
        comma-separated `exclude`; return its wall time and CPU time (nbgrader and its kernels)."""
        t0, c0 = time.perf_counter(), cpu_of_children()
        self.run("autograde", lab, "--force", f"--student={student}",
                 f"--CourseDirectory.student_id_exclude={exclude}", timeout=timeout)
        return Cost(time.perf_counter() - t0, cpu_of_children() - c0)

    def scores(self, lab: str, student: str, notebook: str | None = None) -> dict[str, tuple[float, float]]:
        """grade cell id -> (score, max score) from the gradebook."""
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}") as gb:
            nb = gb.find_submission_notebook(notebook or lab, lab, student)
            return {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}


def make_course(root: Path) -> NbgraderCourse:
    """A course at root using the repository's configuration and solutions/ (the pipeline's one helper)."""
    from autograder.pipeline.config import write_course

    return NbgraderCourse(write_course(root, ROOT, link_solutions=True))
