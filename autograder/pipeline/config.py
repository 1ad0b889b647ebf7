"""The settings of one grading run (`Config`), where the course is, and the nbgrader courses each
stage runs in.

A `Config` is frozen: it is made once at the command line (autograder/__main__.py, the Gradescope entry
point), which also reads the environment variables the grader process honours (SPECLAB_SANDBOX,
SPECLAB_BWRAP, SPECLAB_COURSE) into it, and it is passed down unchanged; a stage that needs another
setting makes a copy (`dataclasses.replace`).

The course is the folder holding `solutions/` and `nbgrader_config.py`. The grading commands
work from any folder; the course is, in this order (`find_course`):
1. the folder given with `--course DIR`;
2. the folder named by the environment variable SPECLAB_COURSE;
3. the folder the `autograder` package was installed from (an editable install or a checkout);
4. the working directory or one of its parents.
(The command line reads SPECLAB_COURSE and passes it as `env_course`.)
Anything else is an error that says how to name the course.

Every nbgrader course the pipeline makes (the template, each student's scratch course, the
audits' throw-away courses) is written by `write_course`, and every nbgrader process the
grader runs for itself gets `nbgrader_env`. Students' commands get the sandbox's own
environment instead (autograder/sandbox/policy.py).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.inside.clock import STRETCH
from autograder.sandbox import Limits
from autograder.sandbox.bounds import Bounds

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_PARENT = REPO_ROOT
BIN = Path(sys.executable).parent


# How many times a class run times a student's timed cells, alone: a timing still unclear after the
# first is timed once more at the end of the run (each timing a false failure <= 2.5 % per cell, so
# <= 5 % over both), then its points are held pending until --retime.
TIMING_ATTEMPTS = 2


@dataclass(frozen=True)
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
    unsafe: bool = False  # grade without the sandbox (trusted submissions only; see autograder/README.md)
    lab_checks: tuple[Path, ...] = ()  # folders of check modules of labs outside the package (autograder.checks.add_folder)
    retime: bool = False  # grade again, one at a time, the students whose timed points are pending (results.hold_pending)
    bounds: Bounds = field(default_factory=Bounds)  # what each student's processes may use together (sandbox/bounds.py)
    stretch: float = STRETCH  # a limit of L s ends by (1 + stretch) L s of wall time (autograder/inside/clock.py)
    timing_attempts: int = TIMING_ATTEMPTS  # timings of an unclear timed cell before its points are held
    sandbox_mode: str | None = None  # bubblewrap | uid ($SPECLAB_SANDBOX); None: the strongest that starts
    bwrap: str | None = None  # the bwrap executable to use ($SPECLAB_BWRAP); None: the wheel's or PATH's
    # the hidden inputs' key of the run (autograder/checks/hidden.py); None: drawn once per run by the
    # scheduler. Never written to a file, never passed to a sandbox, never printed.
    run_key: bytes | None = field(default=None, repr=False)
    shard: tuple[int, int] | None = None  # (I, N): grade only shard I of N of the class, in OUT/shards/I-of-N (shards.py)
    timing_parallel: bool = False  # time several students at once, each on cores of its own (schedule._time_all)

    @property
    def code_root(self) -> Path:
        """Where the `speclab` package and `autograder.checks` come from for this course."""
        return self.course_root if (self.course_root / "autograder").is_dir() else REPO_ROOT


def retime_command(cfg: Config, student: str) -> str:
    """The command that times a held student's cells again (what the note on their page says); a shard's
    names the shard (its run folder is OUT/shards/I-of-N), then the merge."""
    if cfg.shard is None:
        return f"python -m autograder grade {cfg.lab} {cfg.submissions} --retime --student {student}"
    i, n = cfg.shard
    out = cfg.out.parent.parent
    return (f"python -m autograder grade {cfg.lab} {cfg.submissions} --out {out} --shard {i}/{n} --retime "
            f"--student {student}, then python -m autograder merge {out}")


def write_course(root: Path, course_root: Path, limits: Limits | None = None, link_solutions: bool = False) -> Path:
    """Make root an nbgrader course: root/nbgrader_config.py loads the course's configuration with root as
    the course directory (and, given limits, the per-cell limits); link_solutions: root/solutions points at
    the course's own solutions/ (a throw-away course that releases or autogrades the course's labs)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ["c = get_config()", f"load_subconfig({str(course_root / 'nbgrader_config.py')!r})"]
    sub = course_root / "autograder" / "inside" / "nbgrader_config.py"  # the root config loads it by a relative path
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
    if link_solutions and not (root / "solutions").exists():
        (root / "solutions").symlink_to(course_root / "solutions", target_is_directory=True)
    return root


def nbgrader_env(root: Path) -> dict:
    """The environment of the grader's own nbgrader processes (release, feedback) in the course at
    root: private home, tmp and IPython dirs. Students' code gets `StudentBox.env` instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON", "SPECLAB"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}", HOME=str(root / "home"),
               TMPDIR=str(root / "tmp"), IPYTHONDIR=str(root / "ipython"), MPLBACKEND="Agg",
               MPLCONFIGDIR=str(root / "home"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               JUPYTER_DATA_DIR=str(root / "home" / "jupyter"), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


# ----------------------------------------------------------------------------- where the course is
ENV = "SPECLAB_COURSE"


class CourseNotFound(SystemExit):
    """Raised (as a clean exit with a message) when no course folder can be found."""


def is_course(folder: Path) -> bool:
    return (folder / "solutions").is_dir() and (folder / "nbgrader_config.py").is_file()


def find_course(explicit: Path | str | None = None, cwd: Path | None = None, env_course: str | None = None) -> Path:
    """The course folder (absolute), following the order in this module's docstring; env_course: the
    value of SPECLAB_COURSE, as the command line read it."""
    if explicit is not None:
        folder = Path(explicit).expanduser().resolve()
        if not is_course(folder):
            raise CourseNotFound(f"--course {explicit}: not a speclab course folder (it needs solutions/ "
                                 f"and nbgrader_config.py; give the root of the instructor repository)")
        return folder
    env = env_course
    if env:
        folder = Path(env).expanduser().resolve()
        if not is_course(folder):
            raise CourseNotFound(f"{ENV}={env}: not a speclab course folder (it needs solutions/ and "
                                 f"nbgrader_config.py)")
        return folder
    if is_course(PACKAGE_PARENT):
        return PACKAGE_PARENT
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_course(folder):
            return folder
    raise CourseNotFound(
        "cannot find the course (a folder with solutions/ and nbgrader_config.py): the installed "
        f"`autograder` package lives in {PACKAGE_PARENT}, which is not one, and neither is {here} nor any "
        f"of its parents. Pass --course DIR (the root of the instructor repository) or set {ENV}=DIR.")
