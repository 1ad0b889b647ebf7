"""The settings of one grading run (`Config`), and the nbgrader course each stage runs in.

Used by every stage of the pipeline (autograder/pipeline.py): the scratch courses of
the students, the template course and the merged output are all nbgrader courses
configured by `course_config`, and every nbgrader process gets `nbgrader_env`.
"""
from __future__ import annotations

import os
import sys
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import sandbox
from .sandbox import Limits

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
UID_BASE = 61000  # children of the grader run as UID_BASE + worker slot when it is root


@dataclass
class Config:
    lab: str
    submissions: Path
    out: Path
    course_root: Path = REPO_ROOT
    workers: int = max(1, os.cpu_count() or 1)
    force: bool = False
    only: tuple[str, ...] = ()  # grade just these students (others keep their results)
    limits: Limits = field(default_factory=Limits)
    recheck: bool = True


def as_dict(cfg: Config) -> dict:
    d = asdict(cfg)
    return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}


def course_config(root: Path, course_root: Path, limits: Limits | None) -> None:
    """Write root/nbgrader_config.py: the course's configuration, root as course directory, and the limits."""
    lines = ["c = get_config()", f"load_subconfig({str(course_root / 'nbgrader_config.py')!r})"]
    sub = course_root / "autograder" / "nbgrader_config.py"  # the root config loads it by a relative path
    if sub.exists():
        lines.append(f"load_subconfig({str(sub)!r})")
    lines.append(f"c.CourseDirectory.root = {str(root)!r}")
    if limits is not None:
        if limits.cell_timeout_s is not None:
            lines.append(f"c.Execute.timeout = {limits.cell_timeout_s}")
        lines += ["c.Execute.interrupt_on_timeout = True",
                  "c.Execute.execute_retries = 0",
                  "c.LimitOutput.max_lines = 1000",
                  "c.LimitOutput.max_traceback = 100"]
    (root / "nbgrader_config.py").write_text("\n".join(lines) + "\n")


def nbgrader_env(root: Path, token: str = "") -> dict:
    """The environment of an nbgrader process in the course at root: private home, tmp and IPython dirs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON", "SPECLAB"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", HOME=str(root / "home"),
               TMPDIR=str(root / "tmp"), IPYTHONDIR=str(root / "ipython"), MPLBACKEND="Agg",
               MPLCONFIGDIR=str(root / "home"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               JUPYTER_DATA_DIR=str(root / "home" / "jupyter"), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    env[sandbox.MARKER] = token or uuid.uuid4().hex
    return env
