"""What one student's processes may use together: a control group and a size-capped scratch folder.

`bwrap.Limits` are per process (prlimit): twenty processes of 100 MB each, plus files in a RAM-backed
/tmp, are each within them, and together they can take the machine's memory (the kernel then kills
the largest process it finds: the grader). A `Group` bounds the sum:

- **memory**, of every process of the student together with the RAM-backed files they write (the
  kernel charges a tmpfs page to the group of the process that wrote it: /tmp, /dev/shm and the
  scratch folder below all count). Over the bound, the kernel's OOM killer chooses inside the group
  only: the student loses its own run, `usage()` counts the kill, and the grader says so;
- **processes and threads** (`pids`), together;
- **CPU**: at most `cpus` cores' worth of time (a CFS quota), so that a student's helpers can slow
  only that student;
- a **freezer**: `frozen()` stops every process of the group at once (the grader pauses the student's
  own sandbox while it times its baseline), and `kill()` freezes the group before killing it, so
  nothing forks away.

A `Scratch` is a size-capped tmpfs mounted over a student's scratch folder: a student who fills it
gets "No space left on device" (and its pages count in the group's memory).

Both need root. Control groups v1 (one hierarchy per controller, as on this project's CI machine) and
v2 (one unified hierarchy, where the grader's own group must let it enable the memory, pids and cpu
controllers below it) are both written directly, file by file, as the kernel's documentation
(Documentation/admin-guide/cgroup-v1/, cgroup-v2.rst) describes. `available()` says what this
machine allows; a grader without them grades with the per-process limits only and says so.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "freezer")
V2_CONTROLLERS = ("memory", "pids", "cpu")
PERIOD_US = 100_000  # the CFS period of the CPU quota


@dataclass(frozen=True)
class Bounds:
    """What one student's processes may use together (a grading run's defaults; see autograder/README.md)."""

    memory_mb: int = 4096  # all its processes' memory and RAM-backed files (/tmp, /dev/shm, scratch)
    processes: int = 512  # processes and threads at once, both its sandboxes together
    cpus: float = 1.0  # cores' worth of CPU time
    disk_mb: int = 1024  # its scratch folder (a tmpfs of this size; also counted in memory_mb)
    # the cores its processes may run on (a cpuset), empty: any. A timing of several students at once gives each
    # its own (schedule._time_all); no process of the group can leave them, whatever affinity it asks for
    cores: tuple[int, ...] = ()


def v1_hierarchies(cores: bool = True) -> tuple[str, ...]:
    """The v1 hierarchies a group has folders in: every controller's, and the cpuset one where it is mounted
    (a group with `Bounds.cores`; and whatever a grader left there)."""
    extra = ("cpuset",) if cores and (CGROUP_FS / "cpuset" / "cgroup.procs").is_file() else ()
    return V1_CONTROLLERS + extra


def cpuset_available() -> bool:
    """Whether a group can be held to cores of its own here (the cpuset controller, v1 or v2)."""
    v = version()
    if v == 1:
        return "cpuset" in v1_hierarchies()
    if v == 2:
        return "cpuset" in (CGROUP_FS / "cgroup.controllers").read_text().split()
    return False


def _own_path(controller: str | None) -> str:
    """This process's group in the hierarchy of `controller` (v1), or in the unified one (None)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller is None and names == "") or (controller is not None and controller in names.split(",")):
            return path.lstrip("/")
    raise OSError(f"this process is in no {controller or 'unified'} control group")


def version() -> int | None:
    """2 (unified hierarchy), 1 (v1 hierarchies with memory, pids, cpu and freezer mounted) or None."""
    if (CGROUP_FS / "cgroup.controllers").is_file():
        return 2
    if all((CGROUP_FS / c / "cgroup.procs").is_file() for c in V1_CONTROLLERS):
        return 1
    return None


class Group:
    """One student's control group; `name` is unique within this grader process."""

    def __init__(self, name: str, bounds: Bounds):
        self.bounds, self.version = bounds, version()
        tag = f"speclab-{os.getpid()}"
        if bounds.cores and not cpuset_available():
            raise OSError("no cpuset controller here: a group cannot be held to cores of its own")
        if self.version == 1:
            self.dirs = {c: CGROUP_FS / c / _own_path(c) / tag / name
                         for c in v1_hierarchies(cores=bool(bounds.cores))}
        elif self.version == 2:
            own = CGROUP_FS / _own_path(None)
            parent = own / tag
            wanted = V2_CONTROLLERS + (("cpuset",) if bounds.cores else ())
            if not parent.is_dir():
                parent.mkdir()
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            if any(c not in enabled for c in wanted):
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            self.dirs = {"unified": parent / name}
        else:
            raise OSError("no control groups: neither a unified hierarchy nor the v1 ones are mounted")
        try:
            for c, d in self.dirs.items():
                if c == "cpuset":  # v1: a cpuset folder starts with no cores and no memory nodes: its parent's first
                    _make_cpuset_folders(d)
                else:
                    d.mkdir(parents=self.version == 1, exist_ok=True)
            self._limit()
        except OSError:
            self.remove()
            raise

    def _write(self, controller: str, name: str, value) -> None:
        (self.dirs[controller] / name).write_text(str(value))

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.dirs[controller] / name).read_text()
        except OSError:
            return ""

    def _limit(self) -> None:
        b = self.bounds
        memory, quota = b.memory_mb << 20, max(1000, int(b.cpus * PERIOD_US))
        if self.version == 1:
            self._write("memory", "memory.limit_in_bytes", memory)
            if (self.dirs["memory"] / "memory.memsw.limit_in_bytes").exists():  # swap is no way around it
                self._write("memory", "memory.memsw.limit_in_bytes", memory)
            self._write("pids", "pids.max", b.processes)
            self._write("cpu", "cpu.cfs_period_us", PERIOD_US)
            self._write("cpu", "cpu.cfs_quota_us", quota)
            if b.cores:
                self._write("cpuset", "cpuset.cpus", _cpu_list(b.cores))
        else:
            self._write("unified", "memory.max", memory)
            if (self.dirs["unified"] / "memory.swap.max").exists():
                self._write("unified", "memory.swap.max", 0)
            self._write("unified", "pids.max", b.processes)
            self._write("unified", "cpu.max", f"{quota} {PERIOD_US}")
            if b.cores:
                self._write("unified", "cpuset.cpus", _cpu_list(b.cores))

    # ------------------------------------------------------------------ joining
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def join_prefix(self) -> list[str]:
        """A command prefix that moves itself into the group, then execs the rest: every process the
        command starts is born inside (nothing can fork before it is counted)."""
        joins = " && ".join(f"echo $$ > '{f}'" for f in self.procs_files())
        return ["sh", "-c", f"{joins} && exec \"$@\"", "sh"]

    def thread_files(self) -> list[Path]:
        """The file that lists the group's threads (v1 `tasks`, v2 `cgroup.threads`)."""
        return [self.dirs["cpu"] / "tasks"] if self.version == 1 else [self.dirs["unified"] / "cgroup.threads"]

    def tids(self) -> set[int]:
        """The group's threads now (every thread of every process in it)."""
        return _ids_in(self.thread_files())

    def pids(self) -> set[int]:
        """The group's processes now."""
        return _ids_in(self.procs_files())

    # ------------------------------------------------------------------ freezing
    def _set_frozen(self, frozen: bool, wait_s: float = 10.0) -> bool:
        """Freeze or thaw the group; False if it did not reach that state within `wait_s`, or its freezer
        is gone (a group half removed: nothing is left in it to freeze)."""
        try:
            if self.version == 1:
                self._write("freezer", "freezer.state", "FROZEN" if frozen else "THAWED")
                want = "FROZEN" if frozen else "THAWED"
                done = lambda: self._read("freezer", "freezer.state").strip() == want  # noqa: E731
            else:
                self._write("unified", "cgroup.freeze", 1 if frozen else 0)
                done = lambda: f"frozen {1 if frozen else 0}" in self._read("unified", "cgroup.events")  # noqa: E731
        except FileNotFoundError:
            return False
        deadline = time.monotonic() + wait_s
        while not done():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    @contextmanager
    def frozen(self):
        """Every process of the group stopped while inside (it cannot run, fork or be scheduled)."""
        self._set_frozen(True)
        try:
            yield
        finally:
            self._set_frozen(False)

    def kill(self, wait_s: float = 10.0) -> None:
        """Kill every process of the group and wait until none is left."""
        deadline = time.monotonic() + wait_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            self._set_frozen(True, 1.0)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self._set_frozen(False, 1.0)  # a frozen process does not die until thawed
            time.sleep(0.02)

    # ------------------------------------------------------------------ accounting
    def usage(self) -> dict:
        """What the group used so far: peak memory (MB), OOM kills, CPU seconds, times a fork was refused."""
        def field(text: str, key: str) -> int:
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    return int(parts[1])
            return 0

        if self.version == 1:
            peak = int(self._read("memory", "memory.max_usage_in_bytes") or 0)
            ooms = field(self._read("memory", "memory.oom_control"), "oom_kill")
            cpu = int(self._read("cpuacct", "cpuacct.usage") or 0) / 1e9
            refused = field(self._read("pids", "pids.events"), "max")
        else:
            peak = int(self._read("unified", "memory.peak") or 0)
            ooms = field(self._read("unified", "memory.events"), "oom_kill")
            cpu = field(self._read("unified", "cpu.stat"), "usage_usec") / 1e6
            refused = field(self._read("unified", "pids.events"), "max")
        return {"peak_mb": round(peak / 2**20), "oom_kills": ooms, "cpu_s": round(cpu, 3), "forks_refused": refused}

    def cpu_seconds(self) -> float:
        """CPU time charged to the group so far (every process of the student, by the kernel)."""
        if self.version == 1:
            return int(self._read("cpuacct", "cpuacct.usage") or 0) / 1e9
        for line in self._read("unified", "cpu.stat").splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
        return 0.0

    def remove(self, wait_s: float = 10.0) -> bool:
        """Kill what is left and remove the group (and this grader's parent folder once empty). A process
        can still be joining (a `join_prefix` shell between two of its writes): the group is killed again
        until every folder of it is gone, or `wait_s` has passed (False)."""
        deadline = time.monotonic() + wait_s
        while True:
            self.kill(max(0.1, deadline - time.monotonic()))
            for d in self.dirs.values():
                try:
                    d.rmdir()
                except OSError:  # gone already, or busy: a process is still in it (or just joined)
                    pass
            left = [d for d in self.dirs.values() if d.exists()]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for d in self.dirs.values():
            try:
                d.parent.rmdir()
            except OSError:
                pass
        return not left


@contextmanager
def beside(group: "Group | None", name: str = "grader"):
    """This process, for the block, in a control group `name` of its own beside the student's `group`, with
    the same CPU quota and share, its memory and processes unbounded. A timing compares the course's code,
    run here, with the student's, run in `group`. The kernel shares the CPU between groups first: a process
    left in its session's group (with autogroup scheduling on, as on most desktops and CI machines) shares
    one group's share with every other process of its session, while the student's group holds a share of
    its own, so another busy process of the grader's session would slow only the course's side. None: no
    group, nothing changes."""
    if group is None:
        yield
        return
    v = group.version
    peer = Group(name, group.bounds)  # on the student's cores too, when it has its own
    homes = ([CGROUP_FS / c / _own_path(c) / "cgroup.procs" for c in peer.dirs] if v == 1
             else [CGROUP_FS / _own_path(None) / "cgroup.procs"])
    try:
        if v == 1:
            if (peer.dirs["memory"] / "memory.memsw.limit_in_bytes").exists():  # never below the memory limit
                peer._write("memory", "memory.memsw.limit_in_bytes", -1)
            peer._write("memory", "memory.limit_in_bytes", -1)
            peer._write("pids", "pids.max", "max")
        else:
            peer._write("unified", "memory.max", "max")
            peer._write("unified", "pids.max", "max")
        for f in peer.procs_files():
            f.write_text(str(os.getpid()))
        yield
    finally:
        for f in homes:  # back home first: removing the group kills what is left in it
            try:
                f.write_text(str(os.getpid()))
            except OSError:
                pass
        if os.getpid() not in peer.pids():
            peer.remove()


# The CPU weight of a timed pair (the student's group and the grader's beside it, through their common
# parent) against a group of default weight (v2 `cpu.weight` 100, v1 `cpu.shares` 1024; with autogroup
# scheduling, every session's processes together are one such group): 100 times.
TIMING_WEIGHT = 100
DEFAULT_WEIGHT = {1: 1024, 2: 100}  # the kernel's default for a new group


@contextmanager
def first_in_line(group: "Group | None"):
    """For the block, the parent group of the student's `group` (the one this grader process made, which
    also holds the grader's group `beside` it) weighs TIMING_WEIGHT times a default group when the kernel
    shares the CPU: outside work on the machine (another session's busy process) gets the cores the timed
    pair leaves idle, and little of the core it uses. The student's own CPU quota still holds. None: no
    group, nothing changes."""
    if group is None:
        yield
        return
    v = group.version
    path = (group.dirs["cpu"].parent / "cpu.shares") if v == 1 else (group.dirs["unified"].parent / "cpu.weight")
    path.write_text(str(DEFAULT_WEIGHT[v] * TIMING_WEIGHT))
    try:
        yield
    finally:
        try:
            path.write_text(str(DEFAULT_WEIGHT[v]))
        except OSError:  # the group is gone with the student's: nothing to put back
            pass


def current_core() -> int | None:
    """The core this thread runs on now (/proc/thread-self/stat, field 39), or None where it cannot be read."""
    try:
        return int(Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


@contextmanager
def one_core(group: "Group | None"):
    """For the block, this thread and every thread of the student's `group` (and any thread they start: a new
    thread inherits its creator's affinity) run on one core, the one this thread is on when the block starts.
    A timing compares the course's code, run in this thread, with the student's, run in its sandbox, as the
    notebook compares them in one process on one core: cores of one machine do not run equally fast (on a
    virtual machine, the one whose host core is shared with another guest's work runs interpreted code up to
    1.7x slower), and a ratio of two calls timed on two cores measures that too. Every affinity is put back
    when the block ends. A student's process may widen its own affinity: its time is counted in CPU seconds
    of its whole group, so spreading work over cores buys nothing, and where it runs is then its own choice.
    None (no group), one core, or a machine that refuses (not Linux, a container without the right): nothing
    changes."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = set()
    core = current_core()
    if group is None or len(allowed) < 2 or core not in allowed:
        yield
        return
    moved: dict[int, set[int]] = {}
    try:
        os.sched_setaffinity(0, {core})
    except OSError:
        yield
        return
    try:
        for tid in group.tids():
            try:
                before = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, {core})
                moved[tid] = before
            except OSError:  # gone already, or not this process's to move
                pass
        yield
    finally:
        os.sched_setaffinity(0, allowed)
        for tid, before in moved.items():
            try:
                os.sched_setaffinity(tid, before)
            except OSError:
                pass


class Scratch:
    """A size-capped tmpfs mounted over a (new, empty) folder; `close()` unmounts it."""

    def __init__(self, path: Path, size_mb: int):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755,nosuid,nodev",
                            "speclab-scratch", str(self.path)], capture_output=True, text=True)
        if r.returncode:
            raise OSError(f"cannot mount a tmpfs: {r.stderr.strip() or r.returncode}")
        self.size_mb = size_mb

    def used_mb(self) -> float:
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize / 2**20

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)


def clean_up_after(pid: int, scratches: list[Path]) -> None:
    """What a grader process `pid` that was killed left behind: its students' groups (every process in
    them killed) and the scratch tmpfs it mounted at `scratches`. A group is removed whole (every
    controller's folder of it at once), whichever hierarchy still shows it."""
    v = version()
    tops = ({c: CGROUP_FS / c / _own_path(c) / f"speclab-{pid}" for c in v1_hierarchies()} if v == 1 else
            {"unified": CGROUP_FS / _own_path(None) / f"speclab-{pid}"} if v == 2 else {})
    names = sorted({d.name for top in tops.values() if top.is_dir() for d in top.iterdir() if d.is_dir()})
    for name in names:
        group = Group.__new__(Group)
        group.version, group.dirs = v, {c: top / name for c, top in tops.items()}
        group.remove()
    for top in tops.values():
        try:
            top.rmdir()
        except OSError:
            pass
    for path in scratches:
        if os.path.ismount(path):
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


@lru_cache(maxsize=1)
def available() -> tuple[bool, bool, str]:
    """(control groups usable, scratch tmpfs mountable, why not, in words) on this machine, by trying."""
    why = []
    groups = scratch = False
    if os.geteuid() != 0:
        return False, False, "the grader is not root"
    try:
        Group("probe", Bounds()).remove()
        groups = True
    except OSError as err:
        why.append(f"no control group per student ({err})")
    probe = Path(f"/tmp/speclab-scratch-probe-{os.getpid()}")
    try:
        Scratch(probe, 1).close()
        scratch = True
    except OSError as err:
        shutil.rmtree(probe, ignore_errors=True)
        why.append(f"no size-capped scratch ({err})")
    return groups, scratch, "; ".join(why)


def _cpu_list(cores) -> str:
    """The kernel's list format of a set of cores: "0,2,3"."""
    return ",".join(str(c) for c in sorted(cores))


def _make_cpuset_folders(leaf: Path) -> None:
    """Make a v1 cpuset folder and those above it that are missing, each given its parent's cores and memory
    nodes (a cpuset with none can hold no process, nor can its children)."""
    missing = []
    d = leaf
    while not d.is_dir():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        d.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not (d / name).read_text().strip():
                (d / name).write_text((d.parent / name).read_text().strip())


def _ids_in(files) -> set[int]:
    """The ids listed in a control group's `cgroup.threads`/`tasks` or `cgroup.procs` files; a file that went
    away meanwhile (the group being removed) lists none."""
    out: set[int] = set()
    for f in files:
        try:
            out |= {int(x) for x in f.read_text().split()}
        except OSError:
            pass
    return out
