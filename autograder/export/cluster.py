"""What a cluster scheduler must grant one shard of a class, and the files that ask a scheduler for it.

A class too large for one machine is graded in N shards (`grade --shard I/N`, autograder/pipeline/shards.py),
then merged (`merge OUT`). This module is the one place that turns the grader's own configuration into what
one shard asks of a scheduler (`resources`):

- **cores**: W workers each hold a student bounded to `Bounds.cpus` cores' worth of CPU time
  (autograder/sandbox/bounds.py), counted in whole cores so that a student never shares one, plus one core
  for the grader's own processes (the class process and the grader process that judges each student);
- **memory**: `Bounds.memory_mb` (a student's processes and RAM-backed files, scratch included) for each
  student the shard holds at once (its W workers, or, in the timed phase, one on each of its cores:
  --timing-parallel), plus `GRADER_MB` for the grader's processes. A student over its bound is killed inside
  its own control group, well before the shard's limit;
- **processes**: `Bounds.processes` for each student at once, plus `GRADER_PIDS`;
- **wall time**: the grader's own worst case (`shard_time_s`), each step of each student at the limit
  `schedule.process_limit_s` gives it.

`python -m autograder cluster slurm ...` writes a Slurm array job and a merge job that waits for it
(`autograder/export/slurm/`); `python -m autograder cluster kubernetes ...` writes an Indexed Job and a merge
Job (`autograder/export/kubernetes/`). Each prints the commands that submit what it wrote. The submissions,
the output folder and the course must be where every node (or pod) sees them at the same paths: a shared
file system, or a volume.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from autograder.pipeline.config import ENV, Config, find_course
from autograder.pipeline.nbgrader import RELEASE_TIMEOUT_S
from autograder.pipeline.schedule import process_limit_s, timing_sets
from autograder.sandbox import VERDICT_SLOTS, Limits
from autograder.sandbox.bounds import Bounds


class Overhead(NamedTuple):
    """What the grader's own processes take on top of its students': a fixed part for the class process, and
    a part for each worker's grader process."""

    base: int
    per_worker: int

    def of(self, workers: int) -> int:
        return self.base + self.per_worker * workers


# Memory (MB) of the grader's own processes, outside every student's bound: the class process (collecting,
# the lab's release by nbgrader, the report) and one fresh grader process per student at once (schedule.py
# starts each student's step in a process of its own), which imports the pipeline and the lab's checks: 236 MB
# at most once Lab 2's are imported (torch among them; 56 MB for Lab 1's), measured as the peak resident size of
# a fresh interpreter; the checks then run the course's small models. An allowance, not a limit the grader holds.
GRADER_MB = Overhead(base=512, per_worker=512)
# Processes and threads of the grader's own processes: the class process's worker threads and the grader
# process of each worker with its threads (numpy's, torch's). Also an allowance.
GRADER_PIDS = Overhead(base=64, per_worker=64)
GRADER_CORES = 1  # the grader's own processes: one core beside its students' (an allowance too)
# How long the release of the lab may take before a shard grades anyone (pipeline/nbgrader.py's build_template)
RELEASE_S = RELEASE_TIMEOUT_S
# The merge runs no student code: it copies each shard's results and writes each student's page. Its time is
# an allowance: the release's again (it reads the template), and MERGE_PER_STUDENT_S for each student.
MERGE_PER_STUDENT_S = 10


@dataclass(frozen=True)
class Resources:
    """What one job asks of the scheduler (a shard of the class, or the merge)."""

    workers: int  # students whose untimed checks run at once (grade --workers); the merge: 1
    students: int  # students it grades, at most; the merge: 0
    at_once: int  # students in the shard at once, at most: its workers, or more timed at once by --timing-parallel
    cpus: int  # whole cores
    memory_mb: int
    pids: int  # processes and threads at once
    time_s: int  # wall time, at worst
    step_s: int = 0  # the longest one step of one student may run (schedule.process_limit_s); the merge: 0


def run_config(bounds: Bounds | None = None, limits: Limits | None = None) -> Config:
    """A grading run's configuration with its defaults (and these bounds and limits): what a shard runs under,
    since the scripts pass none of the grader's limits."""
    return Config("", Path(), Path(), bounds=bounds or Bounds(), limits=limits or Limits())


def timed_at_once(cpus: int, bounds: Bounds) -> int:
    """How many students `grade --timing-parallel` times at once on `cpus` cores (schedule.timing_sets)."""
    return len([s for s in timing_sets(range(cpus), bounds.cpus) if s]) or 1


def shard_time_s(students: int, workers: int, notebooks: int, cpus: int, cfg: Config) -> int:
    """The longest a shard of `students` runs, by the grader's own limits: the release, then the untimed
    step of every student, `workers` at once, then the timed step, as many at once as `timed_at_once` on the
    first timing and alone on each later one (Config.timing_attempts); each step at the limit
    schedule.process_limit_s gives it (the notebook limit, stretched by the wait for a core)."""
    first = math.ceil(students / timed_at_once(cpus, cfg.bounds))
    steps = math.ceil(students / workers) + first + (cfg.timing_attempts - 1) * students
    return math.ceil(RELEASE_S + steps * step_s(notebooks, cfg))


def step_s(notebooks: int, cfg: Config) -> int:
    """The longest one step of one student runs, untimed or timed: the limit schedule.process_limit_s gives its
    grader process (the notebook limit, stretched by the wait for a core, for nbgrader's run and the
    re-check)."""
    return math.ceil(process_limit_s(cfg, {f"notebook {i}": {} for i in range(notebooks)}))


def resources(workers: int, students: int, notebooks: int, bounds: Bounds | None = None,
              limits: Limits | None = None) -> Resources:
    """What one shard of at most `students` students asks for, graded `workers` at a time, for a lab of
    `notebooks` notebooks, under the grader's default bounds and limits (or these)."""
    if workers < 1 or students < 0 or notebooks < 1:
        raise ValueError(f"workers {workers}, students {students}, notebooks {notebooks}: need workers >= 1, "
                         f"students >= 0 and notebooks >= 1")
    if workers > VERDICT_SLOTS - 1:  # schedule._grade_untimed_all grades at most this many at once
        raise ValueError(f"--workers {workers}: the grader grades at most {VERDICT_SLOTS - 1} students at once "
                         f"(sandbox/policy.py VERDICT_SLOTS); use more shards instead")
    cfg = run_config(bounds, limits)
    b = cfg.bounds
    cpus = workers * math.ceil(b.cpus) + GRADER_CORES
    # --timing-parallel times a student on every set of cores the shard holds, the grader's own core included,
    # so that more students than the workers may run at once, each with its own bounds and grader process
    at_once = max(workers, timed_at_once(cpus, b))
    return Resources(workers, students, at_once, cpus, at_once * b.memory_mb + GRADER_MB.of(at_once),
                     at_once * b.processes + GRADER_PIDS.of(at_once),
                     shard_time_s(students, workers, notebooks, cpus, cfg), step_s(notebooks, cfg))


def merge_resources(class_size: int) -> Resources:
    """What the merge asks for: one core, the class process and one process's checks (the feedback pages read
    each cell's rules from the lab's checks), and its allowance of time."""
    return Resources(1, 0, 0, 1, GRADER_MB.of(1), GRADER_PIDS.of(1), RELEASE_S + MERGE_PER_STUDENT_S * class_size)


# ----------------------------------------------------------------------------- a class's plan
@dataclass(frozen=True)
class Plan:
    """A class graded in shards: what every scheduler's files are written from."""

    lab: str
    submissions: str  # as every node (or pod) sees them
    out: str  # the class's output folder, as every node sees it
    shards: int  # N
    parallel: int  # shards running at once, at most
    class_size: int
    notebooks: int
    bounds: Bounds
    shard: Resources  # each shard's
    merge: Resources

    @property
    def job_name(self) -> str:
        return f"speclab-{self.lab}"

    def grade_args(self, index: str) -> list[str]:
        """`python -m autograder` arguments that grade shard `index` (a number, or what expands to one)."""
        return ["grade", self.lab, self.submissions, "--out", self.out, "--shard", f"{index}/{self.shards}",
                "--workers", str(self.shard.workers), "--timing-parallel"]

    def waves(self) -> int:
        """How many rounds of shards the class takes at `parallel` at once."""
        return math.ceil(self.shards / self.parallel)

    def why(self) -> list[str]:
        """Where each figure of a shard's request comes from, in words (for the scripts' and manifests'
        comments)."""
        r, b = self.shard, self.bounds
        return [f"cpus {r.cpus} = {r.workers} worker(s) x {math.ceil(b.cpus)} core(s) (Bounds.cpus {b.cpus:g}, in "
                f"whole cores) + {GRADER_CORES} for the grader's own processes",
                f"memory {r.memory_mb} MB = {r.at_once} x {b.memory_mb} MB (Bounds.memory_mb, scratch included, for "
                f"each of the {r.at_once} students graded or timed at once) + {GRADER_MB.of(r.at_once)} MB for the "
                f"grader (GRADER_MB)",
                f"processes {r.pids} = {r.at_once} x {b.processes} (Bounds.processes) + "
                f"{GRADER_PIDS.of(r.at_once)} for the grader (GRADER_PIDS)",
                f"time {r.time_s} s ({duration(r.time_s)}) at worst: the release ({RELEASE_S} s), then each of "
                f"{r.students} student(s) of {self.notebooks} notebook(s) through every step at its full limit, "
                f"{r.step_s} s (schedule.process_limit_s): untimed {r.workers} at once, timed "
                f"{timed_at_once(r.cpus, b)} at once, timed again alone (Config.timing_attempts)"]

    def merge_why(self) -> list[str]:
        m = self.merge
        return [f"cpus {m.cpus}, memory {m.memory_mb} MB: the class process and one grader process (GRADER_MB)",
                f"time {m.time_s} s: an allowance (the merge runs no student code): RELEASE_S + "
                f"{MERGE_PER_STUDENT_S} s per student"]


def plan(lab: str, submissions: str, out: str, shards: int, parallel: int | None, workers: int, class_size: int,
         notebooks: int, bounds: Bounds | None = None) -> Plan:
    """The plan of a class of `class_size` students cut into `shards` shards; ValueError saying what to change
    when the numbers do not fit."""
    parallel = shards if parallel is None else parallel
    if shards < 1 or not 1 <= parallel <= shards:
        raise ValueError(f"--shards {shards} --parallel {parallel}: need at least one shard, and between 1 and "
                         f"--shards of them at once")
    if shards > class_size:
        raise ValueError(f"--shards {shards} for a class of {class_size}: a shard of nobody would only hold a node; "
                         f"use at most {class_size}")
    per_shard = math.ceil(class_size / shards)  # shards.members: every N-th student of the sorted class
    shard = resources(workers, per_shard, notebooks, bounds)
    return Plan(lab, submissions, out, shards, parallel, class_size, notebooks, bounds or Bounds(), shard,
                merge_resources(class_size))


def class_size(submissions: Path, lab: str) -> int:
    """How many students the submissions hold, as the grader collects them (pipeline/collect.py), collected
    into a throw-away folder (a zip is unpacked there)."""
    from autograder.pipeline.collect import collect

    with tempfile.TemporaryDirectory(prefix="speclab-count-") as tmp:
        return len(collect(submissions, lab, Path(tmp)))


def notebooks_of(course: Path, lab: str) -> int:
    """How many notebooks the lab's release holds: the .ipynb files of solutions/<lab>/ (`make labs`)."""
    found = sorted((course / "solutions" / lab).glob("*.ipynb"))
    if not found:
        raise ValueError(f"no notebook in {course / 'solutions' / lab}: build the lab first (make labs)")
    return len(found)


def duration(seconds: int) -> str:
    """Seconds as hours and minutes, for people."""
    hours, rest = divmod(math.ceil(seconds / 60) * 60, 3600)
    return f"{hours} h {rest // 60:02d} min"


# ----------------------------------------------------------------------------- the command line
def parser() -> argparse.ArgumentParser:
    """The command line of `python -m autograder cluster` (the instructor guide's test reads its options too)."""
    ap = argparse.ArgumentParser(prog="python -m autograder cluster",
                                 description="Write what grades a class in shards on a cluster, and print the "
                                             "commands that submit it (autograder/export/cluster.py).")
    sub = ap.add_subparsers(dest="scheduler", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("lab", help="assignment id, e.g. lab1 (a folder of solutions/)")
    common.add_argument("submissions", help="folder or zip of the class, as every node sees it")
    common.add_argument("--out", required=True, help="the class's output folder, as every node sees it")
    common.add_argument("--shards", type=int, required=True, help="N: the class is graded in N shards")
    common.add_argument("--parallel", type=int, default=None, help="shards running at once, at most (default N)")
    common.add_argument("--workers", type=int, default=1, help="students each shard grades at once (default 1)")
    common.add_argument("--students", type=int, default=None,
                        help="the class's size (default: the submissions counted here, as the grader collects them)")
    common.add_argument("--course", type=Path, default=None,
                        help="the instructor repository (default: found as `grade` finds it)")
    common.add_argument("--dest", type=Path, default=None, help="where to write the files")
    slurm = sub.add_parser("slurm", parents=[common], help="a Slurm array job and the merge that waits for it")
    slurm.add_argument("--python", default=sys.executable,
                       help="the Python every node runs the grader with (default: this one)")
    slurm.add_argument("--partition", default=None, help="the Slurm partition to submit to")
    kube = sub.add_parser("kubernetes", parents=[common], help="an Indexed Job and the merge Job")
    kube.add_argument("--image", required=True, help="a container image holding the course and its Python")
    kube.add_argument("--claim", required=True, help="the PersistentVolumeClaim holding the submissions and OUT")
    kube.add_argument("--mount", default="/grading", help="where the claim is mounted in each pod (default /grading)")
    kube.add_argument("--namespace", default=None)
    kube.add_argument("--python", default="python", help="the Python of the image (default: python)")
    kube.add_argument("--pod-course", default=None,
                      help="the course as the pods see it, e.g. on the claim (default: where the image installed "
                           "autograder from)")
    return ap


def _plan_from(a: argparse.Namespace, course: Path) -> Plan:
    """The plan the command line asks for; SystemExit saying what to change when it does not fit."""
    try:
        size = a.students
        if size is None:
            local = Path(a.submissions)
            if not local.exists():
                raise ValueError(f"{a.submissions} is not here to count: give the class's size with --students")
            size = class_size(local, a.lab)
        return plan(a.lab, a.submissions, a.out, a.shards, a.parallel, a.workers, size, notebooks_of(course, a.lab))
    except ValueError as err:
        raise SystemExit(str(err)) from None


def main(argv: list[str]) -> int:
    """`python -m autograder cluster slurm|kubernetes ...` (argv: what follows `cluster`)."""
    a = parser().parse_args(argv)
    course = find_course(a.course, env_course=os.environ.get(ENV))
    if a.scheduler == "slurm":  # the scripts start in the course: paths given from here are made absolute
        a.submissions, a.out = os.path.abspath(a.submissions), os.path.abspath(a.out)
    p = _plan_from(a, course)
    if a.scheduler == "slurm":
        from autograder.export import slurm

        dest = (a.dest or Path(a.out) / "slurm").resolve()
        slurm.write(p, dest, course, a.python, a.partition)
        print(slurm.instructions(p, dest))
    else:
        from autograder.export import kubernetes

        dest = (a.dest or course / "dist" / f"kubernetes-{a.lab}").resolve()
        kubernetes.write(p, dest, a.image, a.claim, a.mount, a.namespace, a.python, a.pod_course)
        print(kubernetes.instructions(p, dest, a.namespace))
    return 0


if __name__ == "__main__":  # python -m autograder.export.cluster slurm|kubernetes ...
    sys.exit(main(sys.argv[1:]))
