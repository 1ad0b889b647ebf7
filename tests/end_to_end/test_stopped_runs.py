"""A class run stopped in every way leaves nothing behind once the next run is over, and grades every student
once (autograder/pipeline/cleanup.py and spawn.py, issue 49).

The tiny lab, ten students, each notebook slowed by a cell that sleeps, graded by `grade_class` in a process of
its own (the "main process"), two workers. The same class is started five times. Each of the first four runs
is stopped once a new result file appears, in one way each:
- SIGTERM to the main process (what `kill PID` sends), then SIGINT to its whole process group (a terminal's
  Ctrl-C): the run kills the graders in flight, records nothing for their students, removes what they left and
  exits (code 3 here), with nothing left behind before the next run starts;
- SIGKILL of the main process alone: its grader processes live on, orphans, and finish their students while
  the next run starts (which waits for them, by the students' locks);
- SIGKILL of the main process's whole group: the graders die too, leaving control groups and scratch mounts.
The fifth run is left to finish. Afterwards: no control group of the grader, no scratch mount under the output
folder and no process of the sandboxes' uids is left; every student has a result with full marks; each result
file was written once (a thread, `Watch`, samples every result file's modification time throughout); and the last run
says it removed what the group kill left (a control group or a scratch mount, whichever the kill found).

What is "left" is this test's own: `make test` grades other classes beside it, in the other process, with the same
sandbox uids. A control group counts when it is named after one of this test's grader processes (`Watch` records
every process of each run's process group, sampled every 20 ms; a grader lives for seconds); a sandbox uid's process
when it is in one of those groups or in no grader's group at all (one that escaped); a scratch mount when it is under
this test's output folder.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

import grading_fixtures as F
from autograder.audit import reports
from autograder.pipeline import Config, build_template
from autograder.sandbox import processes_of, slot_uids
from autograder.sandbox.bounds import available
from released import seed_template  # one release of a lab per test process (tests/support/released.py)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not available()[0], reason=f"no control groups here: {available()[2]}")]
SUPPORT = Path(__file__).resolve().parents[1] / "support"
STUDENTS = [f"s{i}" for i in range(10)]
STOPS = ("SIGTERM", "SIGINT", "main process", "process group")
RUN = f"""
import sys
sys.path[:0] = [{str(SUPPORT)!r}]
import grading_fixtures as F
from pathlib import Path
from autograder.pipeline import Config, grade_class
from autograder.sandbox import Limits
limits = Limits(cell_timeout_s=30, notebook_timeout_s=120, memory_mb=3072, file_mb=200, output_kb=64)
cfg = Config(F.LAB, Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), workers=2, limits=limits,
             lab_checks=F.LAB_CHECKS)
from autograder.pipeline.spawn import Stopped
try:
    print("graded", len(grade_class(cfg, progress=False)), flush=True)
except Stopped as why:
    print("stopped", why, flush=True)
    sys.exit(3)
"""


class Watch(threading.Thread):
    """Sampled every 20 ms until stopped: every distinct modification time of each result file (`seen`), and the ids
    of every process of the current run's process group (`pids`: its main process and its graders; a run is started
    in a session of its own, `group`, and a grader is its main process's child)."""

    def __init__(self, results: Path):
        super().__init__(daemon=True)
        self.results, self.seen, self.pids, self.group, self.stop = results, {}, set(), None, threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in self.results.glob("*.json") if self.results.is_dir() else []:
                try:
                    self.seen.setdefault(p.stem, set()).add(p.stat().st_mtime_ns)
                except OSError:
                    pass
            group = self.group
            for name in os.listdir("/proc") if group is not None else []:
                if name.isdigit():
                    try:
                        if os.getpgid(int(name)) == group:
                            self.pids.add(int(name))
                    except OSError:  # gone meanwhile
                        pass
            time.sleep(0.02)


def _group_of(pid: int) -> str | None:
    """The name of the grader's control group (speclab-<pid>) the process is in, if any."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    return next((m.group(0) for ln in lines if (m := re.search(r"speclab-\d+", ln))), None)


def _left(out: Path, ours: set[int]) -> dict:
    """What this test's runs left: their graders' control groups, sandbox processes in those groups or in none,
    scratch mounts under OUT."""
    names = {f"speclab-{pid}" for pid in ours}
    uids = {u for slot in range(4) for u in slot_uids(slot)}
    return {"control_groups": [g for g in reports.left_behind()["control_groups"] if Path(g).name in names],
            "mounts under OUT": [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()
                                 if ln.split()[1].startswith(str(out))],
            "processes": sorted(p for u in uids for p in processes_of(u) if _group_of(p) in names | {None})}


def _stop(proc: subprocess.Popen, how: str) -> None:
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    elif how == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    elif how == "main process":
        proc.kill()
    else:
        os.killpg(proc.pid, signal.SIGKILL)


def test_a_run_stopped_in_every_way_leaves_nothing_and_grades_each_student_once(tmp_path):
    course = F.make_course(tmp_path / "course")
    subs, out = tmp_path / "subs", tmp_path / "out"
    release_cfg = Config(F.LAB, subs, out, course, workers=2, lab_checks=F.LAB_CHECKS)
    seed_template(release_cfg)
    build_template(release_cfg)
    release = nbformat.read(out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    for s in STUDENTS:
        (subs / s / F.LAB).mkdir(parents=True)
        nbformat.write(F.student(release, F.SOLUTION, after=["import time\ntime.sleep(1)"]),
                       subs / s / F.LAB / f"{F.LAB}.ipynb")
    watch = Watch(out / "results")
    watch.start()
    args = [sys.executable, "-c", RUN, str(subs), str(out), str(course)]

    def results() -> int:
        return len(list((out / "results").glob("*.json")))

    for how in STOPS:
        before = results()
        run = subprocess.Popen(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        watch.group = run.pid  # a session of its own: its process group's id is its pid
        deadline = time.monotonic() + 600
        while results() == before and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.05)
        assert run.poll() is None, (how, run.stdout.read().decode()[-3000:])  # still grading: stopped halfway
        _stop(run, how)
        said = run.communicate(timeout=120)[0].decode()
        if how in ("SIGTERM", "SIGINT"):  # told to stop: it stops soon, and cleans up itself
            assert run.returncode == 3 and f"stopped {how}" in said, (how, said[-3000:])
            left = _left(out, watch.pids)
            assert not any(left.values()), (how, left)
    assert results() < len(STUDENTS)  # the last run has students left to grade
    last = subprocess.Popen(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch.group = last.pid
    last_out, last_err = last.communicate(timeout=900)
    watch.stop.set()
    watch.join()
    assert last.returncode == 0 and f"graded {len(STUDENTS)}" in last_out, last_out[-3000:] + last_err[-3000:]
    # the graders the group kill took down left what they held at that moment (a control group, a scratch mount, or
    # both, depending on where in a student the kill found them): the last run found and removed it, and says so
    gone = r"cleaned up: (removed the control groups|unmounted) .*(which is gone|left by a grader that is gone)"
    assert re.search(gone, last_err), last_err[-3000:]
    # what counts as this test's is what it sampled: its graders were seen (more processes than the runs' main
    # ones), and every control group the last run removed was named after one of them
    assert len(watch.pids) > len(STOPS) + 1, watch.pids
    removed = {int(pid) for pid in re.findall(r"control groups of grader process (\d+)", last_err)}
    assert removed <= watch.pids, (removed, last_err[-3000:])
    deadline = time.monotonic() + 30
    while any(_left(out, watch.pids).values()) and time.monotonic() < deadline:  # an orphan's last moments
        time.sleep(0.5)
    left = _left(out, watch.pids)
    assert not any(left.values()), left
    scores = {s: json.loads((out / "results" / f"{s}.json").read_text())["score"] for s in STUDENTS}
    assert scores == {s: 5.0 for s in STUDENTS}, scores
    twice = {s: len(t) for s, t in watch.seen.items() if len(t) > 1}
    assert not twice, f"result files written more than once: {twice}"
