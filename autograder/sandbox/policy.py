"""The policy of a student's sandbox, from explicit arguments: what it sees, who it runs as, its
environment and where its logs go.

A `StudentBox` is built once per student (and once more, under a uid of its own, for the
grader's verdict) and then runs every command of that student's grading:
- it sees, read-only, the course's nbgrader configuration and three folders of code: `speclab`,
  `autograder/checks` and `autograder/inside` (plus `autograder/__init__.py`, the package's
  face); never the pipeline, the reference solutions, the mutants or the grading output
  (`course_mounts`);
- it writes only its scratch folder and a private tmpfs (no file is writable by two students' sandboxes);
- all its processes, in both of its sandboxes, are born in one control group of the student's own
  (`group`, autograder/sandbox/bounds.py) that bounds their memory, processes and CPU together;
- it runs under a uid of its own when the grader is root (`slot_uids`), with a cleared environment
  (`env`) and the limits of `bwrap.Limits`;
- its logs are written outside the scratch folder, where the student cannot rewrite them.
"""
from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .bwrap import Capabilities, Limits, Result, Session, capabilities, give_to, minimal_env, run, student_uid

BIN = Path(sys.executable).parent
VERDICT_SLOTS = 32  # uids student_uid(slot) for nbgrader and the re-check, student_uid(32 + slot) for the verdict


def slot_uids(slot: int) -> tuple[int, int]:
    """(uid of nbgrader and the re-check, uid of the verdict's harness) of a worker slot. Two uids, so
    that the two sandboxes of one student, run side by side, neither share a process count nor end
    each other (closing a sandbox ends every process of its uid)."""
    if not 0 <= slot < VERDICT_SLOTS:
        raise ValueError(f"worker slot {slot} out of range: at most {VERDICT_SLOTS} workers")
    return student_uid(slot), student_uid(VERDICT_SLOTS + slot)


def course_mounts(code_root: Path, course_root: Path, extra: tuple[Path, ...] = ()) -> list[Path]:
    """What of the course a student's sandbox sees, read-only: folders, so that a file moved within
    them needs no change here. `extra`: further folders of a lab's checks (`Config.lab_checks`)."""
    code = Path(code_root)
    paths = [Path(course_root) / "nbgrader_config.py", code / "speclab", code / "autograder" / "__init__.py",
             code / "autograder" / "checks", code / "autograder" / "inside", *extra]
    return [p for p in paths if p.exists()]


@dataclass(frozen=True)
class StudentBox:
    """Everything a student's sandboxed commands share; built once per student and uid."""

    code_root: Path  # where `speclab` and `autograder.checks`/`autograder.inside` come from
    mounts: tuple[Path, ...]  # host paths the sandbox may read (course_mounts)
    limits: Limits
    uid: int | None  # the student's uid (used when the grader is root)
    logs: Path  # folder for the commands' logs, outside every scratch folder
    shared: tuple[Path, ...] = ()  # files every student's sandbox may write (the timing lock)
    env_extra: tuple[tuple[str, str], ...] = ()  # variables every command gets
    unsafe: bool = False  # no sandbox: process group and limits only (trusted submissions)
    caps: Capabilities = field(default=None, compare=False)  # type: ignore[assignment]
    group: object = field(default=None, compare=False)  # the student's bounds.Group, shared by its sandboxes
    clock: object = field(default=None, compare=False)  # makes the clock its time limits count (bwrap.run)
    stretch: float | None = None  # how far a limit may outlast its length in wall time (bwrap.run; None: the clock's)

    def __post_init__(self):
        if self.caps is None:
            caps = Capabilities(None, os.geteuid() == 0) if self.unsafe else capabilities()
            object.__setattr__(self, "caps", caps)

    def env(self, scratch: Path) -> dict:
        """A cleared environment for a command whose home is under scratch: nothing of the grader's own
        (tokens, paths) reaches the student."""
        return minimal_env(scratch / "home", PATH=f"{BIN}:/usr/local/bin:/usr/bin:/bin",
                           PYTHONPATH=str(self.code_root), IPYTHONDIR=str(scratch / "ipython"),
                           MPLCONFIGDIR=str(scratch / "home"), JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
                           JUPYTER_DATA_DIR=str(scratch / "home" / "jupyter"), **dict(self.env_extra))

    def give(self, path: Path) -> None:
        """Hand a scratch tree to the student's uid (when the grader is root)."""
        give_to(path, self.uid, self.caps)

    def _log(self, scratch: Path, name: str) -> Path:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / f"{scratch.name}.{name}"

    def run(self, cmd: list[str], cwd: Path, scratch: Path, env: dict, timeout_s: float, log_name: str) -> Result:
        """One command in the sandbox (scratch: its only writable folder); returns once nothing of it is left."""
        with ExitStack() as around:
            for wrap in _AROUND:
                around.enter_context(wrap(cmd))
            return run(cmd, cwd, scratch, env, timeout_s, self.limits, uid=self.uid,
                       log_path=self._log(scratch, log_name), ro=list(self.mounts), caps=self.caps, unsafe=self.unsafe,
                       shared=list(self.shared), group=self.group, clock=self.clock, stretch=self.stretch)

    def session(self, cmd: list[str], cwd: Path, scratch: Path, env: dict, log_name: str) -> Session:
        """An interactive command in the sandbox (stdin and stdout are pipes to the grader)."""
        return Session(cmd, cwd, scratch, env, self.limits, self.uid, self._log(scratch, log_name), list(self.mounts),
                       self.caps, unsafe=self.unsafe, shared=list(self.shared), group=self.group)


_AROUND: list = []  # what wraps every command a StudentBox runs (`around_each_command`)


@contextmanager
def around_each_command(wrap):
    """Within the block, every command a StudentBox runs runs inside `wrap(cmd)` (a context manager): how
    the cost audit (autograder/audit/cost.py) times each phase of a grading."""
    _AROUND.append(wrap)
    try:
        yield
    finally:
        _AROUND.remove(wrap)


# What of a course no student's uid may read in uid mode (bubblewrap mode never mounts them)
SECRET_PARTS = ("solutions", ".git", "autograder/audit", "autograder/authoring")


def lock_down(out: Path, course_root: Path, submissions: Path, reachable: list[Path]) -> list[Path]:
    """uid mode (no mount namespace: students' uids see the machine's files as its permissions say):
    make what the grader keeps from students private to root, and what their sandboxes need reachable.

    - the course's secret parts (`SECRET_PARTS`), the class's submissions and everything already in the
      grading output except `work/` (the scratch folders) and the timing lock: owner only;
    - the grading output itself, `out/work` and `out/work/.verdict`: traversable, not listable (0711); each
      scratch folder is given
      to its student's uid, owner only (`give_to`);
    - every folder above a `reachable` path (the Python environment, the course's code, the scratch
      folders): traversable by others (o+x added, nothing removed).
    The caller sets the umask to 077 while it grades, so what it writes later is private too.
    Returns the folders whose mode changed."""
    changed: list[Path] = []

    def chmod(path: Path, mode: int) -> None:
        if path.exists() and not path.is_symlink() and (path.stat().st_mode & 0o7777) != mode:
            os.chmod(path, mode)
            changed.append(path)

    for rel in SECRET_PARTS:
        chmod(Path(course_root) / rel, 0o700)
    chmod(Path(submissions), 0o700)
    out = Path(out)
    (out / "work" / ".verdict").mkdir(parents=True, exist_ok=True)
    (out / "work" / ".logs").mkdir(parents=True, exist_ok=True)
    for child in out.iterdir():
        if child.name not in ("work", "timing.lock"):
            chmod(child, 0o700 if child.is_dir() else 0o600)
    for d in (out, out / "work", out / "work" / ".verdict"):
        chmod(d, 0o711)
    chmod(out / "work" / ".logs", 0o700)
    for path in [*reachable, out / "work" / ".verdict"]:
        for a in Path(os.path.abspath(path)).parents:
            if a != Path("/") and a.is_dir() and not a.stat().st_mode & 0o001:
                os.chmod(a, a.stat().st_mode | 0o001)
                changed.append(a)
    return changed


def scratch_path(root: Path, *parts: str) -> Path:
    """root/parts, safe for the grader to create or write once the student's sandbox is gone:
    any component the student turned into a symbolic link (to the course, another student's
    results, a system file) is removed, so the grader never writes or reads through it."""
    p = root
    for part in parts:
        p = p / part
        if p.is_symlink():
            p.unlink()
    return p


def no_links(root: Path, path: Path) -> bool:
    """path lies under root with no symbolic link on the way (what the grader may read from scratch)."""
    p = path
    while p != root:
        if p.is_symlink() or p == p.parent:
            return False
        p = p.parent
    return True
