"""A student's control group and scratch, with real processes: what one student's code can take is its own.

Each test starts real processes inside a `bounds.Group` (through `join_prefix`, as the sandbox does)
and reads what the kernel accounts for the group. Nothing here depends on the machine's speed: the
bounds are enforced by the kernel whatever the load (a quota is an upper bound; a frozen process gets
no CPU at all).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.sandbox import Limits, Session, capabilities
from autograder.sandbox.bounds import Bounds, Group, Scratch, available, clean_up_after

GROUPS, MOUNTS, WHY = available()
pytestmark = pytest.mark.skipif(not GROUPS, reason=f"no control groups here: {WHY}")

HOG = """
import os, subprocess, sys
# twenty processes of 100 MB each, every one within a per-process limit, plus files in RAM
kids = [subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(100 << 20); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(20)]
with open("/dev/shm/fill", "wb") as f:
    for _ in range(40):
        f.write(b"x" * (50 << 20))
"""


def run_in(group: Group, code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(group.join_prefix() + [sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def group():
    g = Group(f"test-{os.getpid()}-{time.monotonic_ns()}", Bounds(memory_mb=512, processes=64, cpus=0.5))
    yield g
    g.remove()


def test_processes_started_through_the_prefix_are_counted_in_the_group(group):
    proc = subprocess.Popen(group.join_prefix() + [sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while proc.pid not in group.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in group.pids()
    finally:
        group.kill()
    assert proc.wait(10) == -9 and group.pids() == set()


def test_a_memory_hog_loses_only_its_own_processes(group):
    """Twenty 100 MB processes and 2 GB written to /dev/shm, against a 512 MB bound: the kernel kills
    inside the group, the group counts the kills, and a process outside (this test's) is untouched."""
    shm = "/dev/shm/fill"
    try:
        r = run_in(group, HOG)
    finally:
        group.kill()
        if os.path.exists(shm):
            os.unlink(shm)
    use = group.usage()
    assert use["oom_kills"] >= 1, (use, r.returncode, r.stderr[-500:])
    assert use["peak_mb"] <= 512 + 1
    assert os.getpid() not in group.pids()


def test_a_fork_bomb_stops_at_the_process_bound(group):
    bomb = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            os.close(1)\n            os.close(2)\n            time.sleep(30)\n"
            "            os._exit(0)\n        n += 1\nexcept OSError:\n    print(n)\n")
    try:
        r = run_in(group, bomb, timeout=60)
        assert r.returncode == 0 and 0 < int(r.stdout.split()[0]) < 64, r.stderr[-500:]
        assert group.usage()["forks_refused"] >= 1
    finally:
        group.kill()


def test_cpu_helpers_get_at_most_the_quota(group):
    """Four busy processes for 2 s of wall time in a group of half a core: the kernel charges them at most
    about half a core (quota 0.5 s per second; one CFS period of slack)."""
    burn = ("import multiprocessing as mp, time\n"
            "def spin():\n    end = time.monotonic() + 2\n    while time.monotonic() < end:\n        pass\n"
            "if __name__ == '__main__':\n    ps = [mp.Process(target=spin) for _ in range(4)]\n"
            "    [p.start() for p in ps]\n    [p.join() for p in ps]\n")
    before, t0 = group.cpu_seconds(), time.monotonic()
    run_in(group, burn)
    used, wall = group.cpu_seconds() - before, time.monotonic() - t0
    assert used <= 0.5 * wall + 0.2, (used, wall)


def test_a_frozen_group_gets_no_cpu(group):
    proc = subprocess.Popen(group.join_prefix() + [sys.executable, "-c", "while True:\n    pass"])
    try:
        time.sleep(0.5)
        with group.frozen():
            before = group.cpu_seconds()
            time.sleep(1.0)
            during = group.cpu_seconds() - before
        assert during < 0.01, during
        before = group.cpu_seconds()
        time.sleep(1.0)
        assert group.cpu_seconds() - before > 0.05  # thawed: it runs again
    finally:
        group.kill()
        proc.wait(10)


@pytest.mark.skipif(not MOUNTS, reason=f"cannot mount a tmpfs here: {WHY}")
def test_a_disk_filler_stops_at_the_scratch_size(tmp_path, group):
    scratch = Scratch(tmp_path / "student", 64)
    try:
        code = (f"import os\ntry:\n    for i in range(100):\n        with open('{scratch.path}/f%d' % i, 'wb') as f:\n"
                f"            f.write(b'x' * (16 << 20))\nexcept OSError as err:\n    print(err.errno)\n")
        r = run_in(group, code)
        assert r.stdout.split() == ["28"], r.stderr[-500:]  # ENOSPC
        assert 60 <= scratch.used_mb() <= 64
        assert group.usage()["peak_mb"] >= 60  # the tmpfs pages are charged to the writer's group
    finally:
        scratch.close()
    assert not os.path.ismount(tmp_path / "student")


def test_a_sandbox_session_runs_inside_the_group(tmp_path, group):
    caps = capabilities()
    if not caps.ok:
        pytest.skip("no sandbox here")
    scratch = tmp_path / "s"
    scratch.mkdir()
    s = Session([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"], scratch, scratch,
                {"PATH": os.environ["PATH"]}, Limits(), uid=None if not caps.root else 250_123, caps=caps,
                group=group)
    try:
        assert s.proc.stdout.readline().strip() == b"up"
        assert group.pids(), "the sandbox's processes are not in the student's group"
    finally:
        s.close()


def test_a_killed_grader_leaves_no_group_and_no_mount(tmp_path):
    """A grader process killed mid-grading (its limit): clean_up_after removes its groups, with the
    processes in them, and unmounts its scratch."""
    mount = tmp_path / "scratch"
    code = ("import sys, subprocess, time\nsys.path.insert(0, %r)\n"
            "from autograder.sandbox.bounds import Bounds, Group, Scratch\n"
            "g = Group('student', Bounds())\nScratch(%r, 16)\n"
            "p = subprocess.Popen(g.join_prefix() + ['sleep', '60'])\n"
            "while not all(str(p.pid) in f.read_text().split() for f in g.procs_files()):\n    time.sleep(0.01)\n"
            "print('ready', flush=True)\ntime.sleep(60)\n"
            % (os.getcwd(), str(mount)))
    grader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert grader.stdout.readline().strip() == b"ready"
    grader.kill()
    grader.wait()
    assert os.path.ismount(mount) == MOUNTS
    clean_up_after(grader.pid, [mount])
    assert not os.path.ismount(mount)
    leftovers = subprocess.run(["pgrep", "-f", "^sleep 60$"], capture_output=True, text=True).stdout.split()
    assert not leftovers or all(not os.path.exists(f"/proc/{p}") for p in leftovers)
    assert not any(top.exists() for top in Path("/sys/fs/cgroup").glob(f"**/speclab-{grader.pid}"))


def test_a_half_removed_group_is_still_removed_with_its_processes(group):
    """A grader killed while a student's process was joining its groups (in one hierarchy, not yet the
    others): one hierarchy's folder is gone, the freezer's among them, and a process sits in another.
    remove() kills it anyway and removes every folder."""
    sleeper = subprocess.Popen(["sleep", "60"])
    (group.dirs["memory" if group.version == 1 else "unified"] / "cgroup.procs").write_text(str(sleeper.pid))
    if group.version == 1:
        group.dirs["freezer"].rmdir()
    assert group.remove(wait_s=10)
    assert sleeper.wait(timeout=10) == -9
    assert not any(d.exists() for d in group.dirs.values())


def test_the_graders_side_of_a_timing_stands_beside_the_student(group):
    """bounds.beside: for the block, the grader's process sits in a group of its own beside the student's, with
    the same CPU quota (so the kernel weighs the course's baseline as it weighs the student's code, whatever
    else runs in the grader's session), its memory and processes unbounded; afterwards it is back where it
    was and that group is gone, the student's untouched."""
    from autograder.sandbox.bounds import beside

    def cpu_path():
        return next(line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines()
                    if "cpu" in line.split(":")[1].split(","))

    home = cpu_path()
    with beside(group, "grader-test"):
        inside = cpu_path()
        assert inside.endswith(f"/speclab-{os.getpid()}/grader-test"), inside
        peer = group.dirs["cpu"].parent / "grader-test"
        assert (peer / "cpu.cfs_quota_us").read_text() == (group.dirs["cpu"] / "cpu.cfs_quota_us").read_text()
        assert os.getpid() in {int(x) for x in (peer / "cgroup.procs").read_text().split()}
    assert cpu_path() == home
    assert not peer.exists() and group.dirs["cpu"].is_dir()


def test_a_timed_pair_is_first_in_line_for_the_cpu():
    """bounds.first_in_line: for the block, the student's group (and the grader's beside it, through their
    parent) weighs TIMING_WEIGHT times a default group. A busy process in the group and one outside it, in
    a session of its own (its own scheduling group, as an outside busy loop is), share one core for 2 s:
    the group's gets at least 80 % of it (about 99 % is expected; an even share would give 50 %).
    Afterwards the parent's weight is the kernel's default again."""
    from autograder.sandbox.bounds import DEFAULT_WEIGHT, TIMING_WEIGHT, first_in_line

    group = Group(f"first-{os.getpid()}-{time.monotonic_ns()}", Bounds(memory_mb=512, processes=64, cpus=1.0))
    weight = group.dirs["cpu"].parent / "cpu.shares" if group.version == 1 else group.dirs["unified"].parent / "cpu.weight"
    spin = "import os, time\nos.sched_setaffinity(0, {0})\nend = time.monotonic() + 4\nwhile time.monotonic() < end:\n    pass\n"
    outside = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
    try:
        with first_in_line(group):
            assert int(weight.read_text()) == DEFAULT_WEIGHT[group.version] * TIMING_WEIGHT
            inside = subprocess.Popen(group.join_prefix() + [sys.executable, "-c", spin.replace("4", "2.5", 1)])
            time.sleep(0.5)  # both are running, on core 0
            before, other = group.cpu_seconds(), _run_s(outside.pid)
            time.sleep(1.5)
            mine, theirs = group.cpu_seconds() - before, _run_s(outside.pid) - other
            inside.wait(10)
        # the two's CPU between them (a third busy process on core 0, another test's, changes neither's weight)
        share = mine / (mine + theirs)
        assert share >= 0.8, share
        assert int(weight.read_text()) == DEFAULT_WEIGHT[group.version]
    finally:
        outside.kill()
        outside.wait()
        group.remove()


def _run_s(pid: int, field: int = 0) -> float:
    """Seconds a process ran (field 0) or was ready to run but waited (field 1), from /proc/PID/schedstat."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[field]) / 1e9


def _group_clock_ratio(cpus: float, threads: int, compete: bool) -> tuple[float, float, float]:
    """(own time, CPU time, waiting time reported by the kernel), each over wall time, of a group of `threads`
    busy processes on core 0 under a quota of `cpus` cores, for 3 s, beside a busy process outside it on core
    0 when `compete`."""
    from autograder.pipeline.judge import own_clock

    group = Group(f"clock-{os.getpid()}-{time.monotonic_ns()}", Bounds(memory_mb=512, processes=64, cpus=cpus))
    spin = "import os, time\nos.sched_setaffinity(0, {0})\nend = time.monotonic() + 5\nwhile time.monotonic() < end:\n    pass\n"
    outside = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True) if compete else None
    inside = [subprocess.Popen(group.join_prefix() + [sys.executable, "-c", spin]) for _ in range(threads)]
    try:
        time.sleep(0.7)  # all started and spinning
        clock, before, t0 = own_clock(group), group.cpu_seconds(), time.monotonic()
        waited = sum(_run_s(p.pid, 1) for p in inside)
        time.sleep(3)
        own, cpu, wall = clock.now(), group.cpu_seconds() - before, time.monotonic() - t0
        waited = sum(_run_s(p.pid, 1) for p in inside) - waited
        return own / wall, cpu / wall, waited / wall
    finally:
        for p in inside + ([outside] if outside else []):
            p.kill()
            p.wait()
        group.remove()


def test_a_groups_clock_does_not_count_the_time_outside_work_kept_it_waiting():
    """bounds.own_clock: a busy process in the group and one outside it share core 0; the group's clock
    counts about the CPU time the group got (half the wall's), where a wall clock would count it all.
    Its time limits therefore stretch with the machine's load (autograder/inside/clock.py)."""
    own, cpu, waited = _group_clock_ratio(1.0, 1, compete=True)
    assert waited >= 0.2, waited  # the group did wait for the core
    # its clock is the wall time less that waiting (a wall clock: 1). Not its CPU time: the time a virtual
    # machine's host takes from it (steal) is neither running nor waiting for the guest's kernel
    assert abs(own - (1 - waited)) <= 0.1, (own, waited, cpu)


def test_a_group_that_uses_its_whole_quota_gets_no_discount():
    """Two busy processes under a quota of half a core: the kernel throttles them at the quota, and counts
    that as waiting (`run_delay`), but time the group spent using its quota is never discounted: its clock
    counts at least its CPU time over its quota (the wall's speed on a quiet machine, where the quota is
    all used), so a student cannot stretch its own limits by running more threads than its quota. Outside
    load can only lower the CPU time the group gets, and the bound with it."""
    own, cpu, _ = _group_clock_ratio(0.5, 2, compete=False)
    assert cpu <= 0.5 + 0.05, cpu  # the quota held
    assert own >= cpu / 0.5 - 0.1, (own, cpu)


def test_one_core_puts_this_thread_and_the_students_threads_on_one_core_then_back(group):
    """bounds.one_core(group): inside, this thread and every thread of the student's group (a process started
    through the group's prefix, with a second thread) may run only on the core this thread was on when the block
    began, and a process the student starts inside inherits it; afterwards every affinity is as before."""
    from autograder.sandbox.bounds import current_core, one_core

    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("one core only: one_core changes nothing")
    code = ("import os, sys, threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); "
            "print('ready', flush=True); sys.stdin.readline(); "
            "import subprocess; print(subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'], "
            "capture_output=True, text=True).stdout.strip(), flush=True); sys.stdin.readline()")
    proc = subprocess.Popen(group.join_prefix() + [sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        tids = group.tids()
        assert len(tids) >= 2  # the process's main thread and its second one
        with one_core(group):
            core = os.sched_getaffinity(0)
            assert len(core) == 1 and core <= allowed
            assert all(os.sched_getaffinity(t) == core for t in tids)
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == str(sorted(core))  # a process it starts inside: the same core
        assert os.sched_getaffinity(0) == allowed
        assert all(os.sched_getaffinity(t) == allowed for t in tids)
        assert current_core() in allowed
    finally:
        proc.kill()
        proc.wait()


def test_one_core_without_a_group_changes_nothing():
    from autograder.sandbox.bounds import one_core

    before = os.sched_getaffinity(0)
    with one_core(None):
        assert os.sched_getaffinity(0) == before
