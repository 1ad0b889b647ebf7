"""What a stopped run leaves behind, found and removed; one grader per student at a time.

A class run can stop in any way: it ends, it is interrupted (SIGINT, SIGTERM), its main process is killed
(SIGKILL: its grader processes live on, orphans, until their student is done), or its whole process group is
killed (the graders die too, and nothing of theirs is undone). Two things keep the next run right:

- **A lock per student** (`student_lock`): a grader process holds OUT/locks/<student>.lock (`fcntl.flock`)
  for as long as it grades that student, and the kernel releases it when the process ends, however it ends.
  A grader of the next run waits for it, then takes the result an orphan wrote if it is current, so no
  student is graded while another process still works in its folder, nor graded twice.
- **A sweep** (`sweep`, run first by every class run and by `python -m autograder clean OUT`): the control
  groups of grader processes that no longer exist are removed with every process still in them
  (autograder/sandbox/bounds.py, `clean_up_after`); every scratch mount under OUT whose student's lock
  nobody holds is unmounted, and that student's scratch folders (OUT/work/<student>, OUT/work/.verdict/
  <student>) removed. What a live grader holds is left alone.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

LOCKS = "locks"
GROUP_RE = re.compile(r"^speclab-(\d+)$")


def lock_path(out: Path, student: str) -> Path:
    return Path(out) / LOCKS / f"{student}.lock"


@contextmanager
def student_lock(out: Path, student: str):
    """Hold the student's lock for the block, waiting for any other holder (an earlier run's grader) first.
    Yields whether it had to wait (another process was grading that student)."""
    path = lock_path(out, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except BlockingIOError:
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = True
        yield waited
    finally:
        os.close(fd)  # releases the lock


def held(out: Path, student: str) -> bool:
    """Whether a live process holds the student's lock now."""
    path = lock_path(out, student)
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mounts_under(root: Path) -> list[Path]:
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    top = str(root.resolve()) + os.sep
    points = [Path(line.split()[1].replace("\\040", " ")) for line in lines if len(line.split()) > 1]
    return sorted((p for p in points if str(p).startswith(top)), key=lambda p: -len(p.parts))  # deepest first


def _student_of(mount: Path, work: Path) -> str | None:
    """The student whose scratch `mount` is: OUT/work/<student>/... or OUT/work/.verdict/<student>/..."""
    parts = mount.relative_to(work).parts
    if parts and parts[0] == ".verdict":
        parts = parts[1:]
    return parts[0] if parts else None


def sweep(out: Path) -> list[str]:
    """Remove what graders that are gone left behind (module docstring); one line per thing removed."""
    import subprocess

    from autograder.sandbox import bounds as bounds_

    out = Path(out).resolve()
    done = []
    for top in _group_tops():
        m = GROUP_RE.match(top.name)
        if m and top.is_dir() and not _alive(int(m.group(1))):
            inside = sorted(d.name for d in top.iterdir() if d.is_dir())
            bounds_.clean_up_after(int(m.group(1)), [])
            if not top.exists():
                done.append(f"removed the control groups of grader process {m.group(1)}, which is gone "
                            f"({len(inside)} group{'s' if len(inside) != 1 else ''}, every process in them killed)")
    work = out / "work"
    for mount in _mounts_under(out):
        student = _student_of(mount, work) if mount.is_relative_to(work) else None
        if student is not None and held(out, student):
            continue  # a live grader works there
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        if not os.path.ismount(mount):
            done.append(f"unmounted {mount} (left by a grader that is gone)")
    for base in (work, work / ".verdict"):  # scratch folders of students nobody grades now
        for folder in sorted(base.iterdir()) if base.is_dir() else []:
            if folder.name.startswith(".") or not folder.is_dir() or held(out, folder.name) \
                    or any(m.is_relative_to(folder) for m in _mounts_under(folder.parent)):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                done.append(f"removed the scratch folder {folder} (left by a grader that is gone)")
    return done


def _group_tops() -> list[Path]:
    """Every `speclab-<pid>` folder of this machine's control groups, in each hierarchy the grader uses."""
    from autograder.sandbox import bounds as bounds_

    v = bounds_.version()
    roots = ([bounds_.CGROUP_FS / c / bounds_._own_path(c) for c in bounds_.v1_hierarchies()] if v == 1 else
             [bounds_.CGROUP_FS / bounds_._own_path(None)] if v == 2 else [])
    return sorted({p for r in roots if r.is_dir() for p in r.iterdir() if GROUP_RE.match(p.name)})
