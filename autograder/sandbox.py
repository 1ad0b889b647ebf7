"""Run one student's grading commands in isolation: own process group, limits, no network.

What the operating system allows is detected once (`capabilities`):
- memory: RLIMIT_AS (address space) set in the child before exec, inherited by the kernel;
- file size: RLIMIT_FSIZE caps any one file the child writes (printed output that lands in a
  log, a notebook full of junk), with SIGXFSZ ignored so a write fails instead of killing;
- network: a fresh network namespace with only a loopback (`unshare -n`, or `unshare -rn`
  when not root); the kernel still talks to nbgrader over that loopback;
- another user: when the grader runs as root, the child runs as an unprivileged uid of its
  own (`setpriv`), so it can write only into its scratch directory (plus world-writable
  places such as /tmp), and cannot touch the course, the repository or other students;
- wall clock: a whole-command timeout; the process group is killed when it expires.
Anything not available is reported in `Capabilities.missing` and in the run's summary.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Limits:
    cell_timeout_s: int | None = None  # nbgrader Execute.timeout per cell; None: the lab's (LAB_TIMEOUT)
    notebook_timeout_s: int = 600  # whole nbgrader call per notebook (and the clean re-check)
    memory_mb: int = 6144  # address space of the grading process tree
    file_mb: int = 200  # largest file the child may write
    output_kb: int = 1024  # printed output kept per stream in the kernel


@dataclass(frozen=True)
class Capabilities:
    netns: tuple[str, ...] = ()  # command prefix giving a network namespace, or ()
    drop_user: bool = False  # root: run children as an unprivileged uid
    missing: tuple[str, ...] = field(default=())


@lru_cache(maxsize=1)
def capabilities() -> Capabilities:
    missing = []
    netns: tuple[str, ...] = ()
    unshare, ip = shutil.which("unshare"), shutil.which("ip") or "/usr/sbin/ip"
    for prefix in ([unshare, "-n"], [unshare, "-rn"]) if unshare else ():
        try:
            ok = subprocess.run([*prefix, "sh", "-c", f"{ip} link set lo up"], capture_output=True,
                                timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            netns = tuple(prefix)
            break
    if not netns:
        missing.append("no network namespace (unshare -n): students' code could reach the network")
    drop = os.geteuid() == 0 and shutil.which("setpriv") is not None and _can_drop(netns)
    if not drop:
        missing.append("students' code runs as the grader's own user (not root, or the interpreter is not "
                       "usable by another uid): it could write wherever the grader can; use a container")
    return Capabilities(netns, drop, tuple(missing))


def _can_drop(netns: tuple[str, ...]) -> bool:
    """Can an unprivileged uid run this interpreter and have it start another one (a kernel)?"""
    probe = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import numpy'], check=True)"
    cmd = wrap([sys.executable, "-c", probe], UID_PROBE, Capabilities(netns, True), Limits())
    try:
        return subprocess.run(cmd, capture_output=True, timeout=60, cwd="/").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


UID_PROBE = 61999


def wrap(cmd: list[str], uid: int | None, caps: Capabilities, limits: Limits) -> list[str]:
    """The command prefixed with its limits, the network namespace and the user switch.

    Limits are set by `prlimit` (not a preexec_fn, which is unsafe in a threaded grader);
    `trap '' XFSZ` makes an over-size write fail with EFBIG instead of killing the writer.
    """
    if caps.drop_user and uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *cmd]
    ip = shutil.which("ip") or "/usr/sbin/ip"
    lo = f"{ip} link set lo up 2>/dev/null; " if caps.netns else ""
    cmd = ["sh", "-c", f"trap '' XFSZ; {lo}exec \"$@\"", "sh", *cmd]
    mem, fsize = limits.memory_mb * 2**20, limits.file_mb * 2**20
    return ["prlimit", f"--as={mem}", f"--fsize={fsize}", "--core=0", "--", *caps.netns, *cmd]


@dataclass
class Result:
    returncode: int | None  # None: killed at the timeout
    log: str  # the last part of the combined output

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run(cmd: list[str], cwd: Path, env: dict, timeout_s: float, limits: Limits, uid: int | None = None,
        log_path: Path | None = None) -> Result:
    """Run cmd sandboxed; kill its whole process group at the timeout. Output goes to log_path."""
    caps = capabilities()
    log_path = log_path or cwd / "grader.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(wrap(cmd, uid, caps, limits), cwd=cwd, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            kill_marked(env.get(MARKER, ""))  # kernels start their own session: find them by marker
    with open(log_path, "rb") as f:
        f.seek(max(0, log_path.stat().st_size - 20000))
        tail = f.read().decode("utf-8", "replace")
    return Result(rc, tail)


MARKER = "SPECLAB_SANDBOX"  # environment variable naming one sandboxed run


def kill_marked(token: str) -> int:
    """SIGKILL every process whose initial environment carries MARKER=token; the count killed."""
    if not token:
        return 0
    needle = f"{MARKER}={token}".encode() + b"\0"
    killed = 0
    for pid_dir in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (pid_dir / "environ").read_bytes() + b"\0":
                os.kill(int(pid_dir.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


def give_to(path: Path, uid: int | None) -> None:
    """Hand a scratch directory tree to the child's uid (when children run as another user)."""
    if uid is None or not capabilities().drop_user:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, uid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)
