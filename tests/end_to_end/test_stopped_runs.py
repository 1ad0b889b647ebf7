"""A class run killed halfway leaves nothing behind once the next run is over, and grades every student once
(autograder/pipeline/cleanup.py, issue 49).

The tiny lab, four students, each notebook slowed by a cell that sleeps, graded by `grade_class` in a process
of its own (the "main process"), two workers. Once the first student's result is written, the test kills:
- the main process alone (SIGKILL): its grader processes live on, orphans, and finish their students; or
- the main process's whole process group (SIGKILL): the graders die too, leaving control groups and scratch
  mounts behind;
- the main process with SIGTERM, or the whole group with SIGINT (a terminal's Ctrl-C): the run kills the
  graders in flight, records nothing for their students, removes what they left and exits (code 3 here)
  with nothing left behind, before any second run.
A second run is then started at once. Afterwards: no control group of the grader, no scratch mount under the
output folder and no process of the sandboxes' uids is left; every student has a result with full marks; and
each result file was written once (a thread watches every result file's modification time throughout).
"""
from __future__ import annotations

import os
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

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not available()[0], reason=f"no control groups here: {available()[2]}")]
SUPPORT = Path(__file__).resolve().parents[1] / "support"
STUDENTS = [f"s{i}" for i in range(4)]
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


class Writes(threading.Thread):
    """Every distinct modification time of each result file, sampled every 20 ms until stopped."""

    def __init__(self, results: Path):
        super().__init__(daemon=True)
        self.results, self.seen, self.stop = results, {}, threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in self.results.glob("*.json") if self.results.is_dir() else []:
                try:
                    self.seen.setdefault(p.stem, set()).add(p.stat().st_mtime_ns)
                except OSError:
                    pass
            time.sleep(0.02)


def _left(out: Path) -> dict:
    uids = {u for slot in range(4) for u in slot_uids(slot)}
    return {**reports.left_behind(), "mounts under OUT": [ln.split()[1] for ln in
                                                          Path("/proc/mounts").read_text().splitlines()
                                                          if ln.split()[1].startswith(str(out))],
            "processes": sorted(p for u in uids for p in processes_of(u))}


@pytest.mark.parametrize("kill", ["main process", "process group", "SIGTERM", "SIGINT"])
def test_a_killed_run_then_a_rerun_leave_nothing_and_grade_each_student_once(tmp_path, kill):
    course = F.make_course(tmp_path / "course")
    subs, out = tmp_path / "subs", tmp_path / "out"
    build_template(Config(F.LAB, subs, out, course, workers=2, lab_checks=F.LAB_CHECKS))
    release = nbformat.read(out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    for s in STUDENTS:
        (subs / s / F.LAB).mkdir(parents=True)
        nbformat.write(F.student(release, F.SOLUTION, after=["import time\ntime.sleep(3)"]),
                       subs / s / F.LAB / f"{F.LAB}.ipynb")
    writes = Writes(out / "results")
    writes.start()
    args = [sys.executable, "-c", RUN, str(subs), str(out), str(course)]
    first = subprocess.Popen(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not list((out / "results").glob("*.json")) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    assert first.poll() is None, first.stdout.read().decode()[-3000:]  # still grading: killed halfway
    if kill == "main process":
        first.kill()
    elif kill == "process group":
        os.killpg(first.pid, signal.SIGKILL)
    elif kill == "SIGTERM":  # what `kill PID` sends
        first.send_signal(signal.SIGTERM)
    else:  # what a terminal's Ctrl-C sends: SIGINT to every process of the foreground group
        os.killpg(first.pid, signal.SIGINT)
    said = first.communicate(timeout=120)[0].decode()
    if kill.startswith("SIGINT") or kill.startswith("SIGTERM"):  # told to stop: it stops soon, cleaning up itself
        assert first.returncode == 3 and f"stopped {kill}" in said, said[-3000:]
        left = _left(out)
        assert not any(left.values()), left
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=900)
    writes.stop.set()
    writes.join()
    assert rerun.returncode == 0 and f"graded {len(STUDENTS)}" in rerun.stdout, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    deadline = time.monotonic() + 30
    while any(_left(out).values()) and time.monotonic() < deadline:  # an orphan's last moments
        time.sleep(0.5)
    left = _left(out)
    assert not any(left.values()), left
    import json

    scores = {s: json.loads((out / "results" / f"{s}.json").read_text())["score"] for s in STUDENTS}
    assert scores == {s: 5.0 for s in STUDENTS}, scores
    twice = {s: len(t) for s, t in writes.seen.items() if len(t) > 1}
    assert not twice, f"result files written more than once: {twice}"
    if kill == "process group":  # the graders died mid-student: their groups and mounts were found and removed
        assert "cleaned up: removed the control groups" in rerun.stderr, rerun.stderr[-3000:]
