"""Stage 3, grade a class: the students W at a time, then their timed cells one student at a time.

`grade_class` grades every student of a class that has no current result:
1. the sandbox is chosen (`sandbox_mode`; in uid mode the grading output, the course's secret parts and
   the submissions are locked down first), and the run's hidden-input key is drawn (Config.run_key);
2. each student's untimed checks (grade.grade_untimed) run in a grader process of its own (spawn.py),
   W at a time; a student whose grader process fails gets a short result that says so
   (results.GradingResult.failed), and the others go on;
3. once every untimed check is over, the timed cells (grade.time_student), one student at a time, so that
   nothing of another student runs beside a timing; or, with --timing-parallel, one student on each set of
   cores of its own (`timing_cores`). A timing still unclear is timed once more, alone, at the end
   (Config.timing_attempts); still unclear, its points are held until `--retime`;
4. the results are merged (report.py); a shard (Config.shard) writes its manifest instead, and `merge`
   merges the shards (shards.py).

A run told to stop (SIGTERM, SIGINT) kills the steps in flight, records nothing for their students, sweeps
what they left (cleanup.py) and raises spawn.Stopped; the students already graded keep their results, and
the same command grades the rest.
"""
from __future__ import annotations

import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from autograder.checks import hidden
from autograder.sandbox import bounds as bounds_
from autograder.sandbox import VERDICT_SLOTS, SandboxUnavailable, course_mounts, lock_down, python_paths, require

from . import cleanup, nbgrader, results, shards, spawn
from .collect import collect, submission_hash
from .config import Config, retime_command
from .grade import sandbox_caps
from .report import merge
from .spawn import in_own_process
from .untrusted import visible


def grade_class(cfg: Config, progress: bool = True) -> list[dict]:
    """Grade every student of cfg.submissions (those without a current result), W at a time; merge.
    cfg is left as it is: the run grades under a copy with its output folder resolved and its key drawn."""
    out = Path(cfg.out).resolve()
    cfg = replace(cfg, out=out if cfg.shard is None else shards.shard_out(out, *cfg.shard),
                  run_key=cfg.run_key if cfg.run_key is not None else hidden.new_key())
    cfg.out.mkdir(parents=True, exist_ok=True)
    for line in cleanup.sweep(cfg.out):  # what a stopped run left: control groups, scratch mounts
        print(f"cleaned up: {visible(line)}", file=sys.stderr)
    whole = collect(Path(cfg.submissions), cfg.lab, cfg.out)
    students = whole if cfg.shard is None else {s: whole[s] for s in shards.members(list(whole), *cfg.shard)}
    if cfg.shard is not None:  # written again once this run is over: a shard stopped halfway has none
        (cfg.out / shards.MANIFEST).unlink(missing_ok=True)
    if cfg.only:
        unknown = set(cfg.only) - set(students)
        if unknown:
            where = "" if cfg.shard is None else f" in shard {cfg.shard[0]}/{cfg.shard[1]}"
            raise SystemExit(f"no submission for {sorted(unknown)}{where}")
    mode = sandbox_mode(cfg)
    if progress:
        print(f"sandbox: {mode}", file=sys.stderr)
    if cfg.timing_parallel and timing_cores(cfg) == [()]:
        print("--timing-parallel: timing one student at a time here (it needs root, control groups with the cpuset "
              "controller, and cores for two students at once)", file=sys.stderr)
    caps = sandbox_caps(cfg)
    umask = os.umask(0o077) if caps is not None and caps.mode == "uid" else None  # what the grader writes: private
    try:
        with spawn.stopping():
            done = _grade_class(cfg, students, progress)
            if cfg.shard is not None:  # finished: its manifest says so (a stopped shard has none)
                shards.finish(cfg, students, whole)
            return done
    finally:  # at the end, or when stopped: an earlier run's orphans this run waited for are gone by now
        for line in cleanup.sweep(cfg.out):
            print(f"cleaned up: {visible(line)}", file=sys.stderr)
        if umask is not None:
            os.umask(umask)


def sandbox_mode(cfg: Config) -> str:
    """The sandbox mode students' code will run in, in words (SystemExit when there is none); in uid mode
    the grading output, the course's secret parts and the submissions are locked down first."""
    if cfg.unsafe:
        return "none (--unsafe): students' code runs with the grader's rights"
    try:
        caps = require(cfg.sandbox_mode, cfg.bwrap)
    except SandboxUnavailable as err:
        raise SystemExit(str(err)) from None
    if caps.mode == "uid":  # lock_down makes the grading output's own folders reachable itself
        lock_down(cfg.out, cfg.course_root, cfg.submissions,
                  [*course_mounts(cfg.code_root, cfg.course_root, cfg.lab_checks), *python_paths()])
    return caps.describe()


def _grade_class(cfg: Config, students: dict, progress: bool) -> list[dict]:
    layout = nbgrader.build_template(cfg, progress)
    limit_s = process_limit_s(cfg, layout)
    _grade_untimed_all(cfg, layout, students, to_grade(cfg, students), limit_s, progress)
    _time_all(cfg, layout, students, limit_s, progress)
    done = [r for s in students if (r := results.load_result(cfg.out, s)) is not None]
    if cfg.shard is None:  # a shard's results are merged with the others' by `merge` (shards.py)
        merge(cfg, layout, done, progress)
    return done


def to_grade(cfg: Config, students: dict) -> list[str]:
    """The students whose untimed checks this run grades: those chosen (cfg.only) without a current
    result (same submission, same grading code, graded at least as safely), or all chosen with --force;
    none with --retime (it times again only the held ones)."""
    version = results.grader_version(cfg.code_root, cfg.out / "template", cfg.lab_checks)
    todo = []
    for s, folder in students.items():
        old = results.load_result(cfg.out, s)
        if cfg.only and s not in cfg.only:
            continue
        if cfg.retime:  # only the students whose timed points are held, graded again below, one at a time
            continue
        if not cfg.force and results.is_current(old, submission_hash(folder), version, cfg.unsafe):
            continue  # same submission, same grading code (and graded at least as safely): keep
        todo.append(s)
    return todo


def process_limit_s(cfg: Config, layout: dict) -> float:
    """How long a student's grader process may run, at worst: nbgrader's run (the verdict beside it), then
    the clean re-check, each at its notebook limit stretched by the time the student waited for a core
    (Config.stretch, autograder/inside/clock.py)."""
    return 2 * (1 + cfg.stretch) * cfg.limits.notebook_timeout_s * max(1, len(layout)) + 300


def _grade_untimed_all(cfg: Config, layout: dict, students: dict, todo: list[str], limit_s: float,
                       progress: bool) -> None:
    """Every student of `todo`'s untimed checks, cfg.workers at a time, each in a grader process of its own
    on a worker slot of its own (a uid pair per slot: policy.slot_uids)."""
    workers = min(max(1, cfg.workers), VERDICT_SLOTS - 1)

    def job(s: str, slot: int, _own) -> str | None:
        """None when graded (the grader process wrote the result), else why not."""
        try:
            in_own_process("grade_untimed", cfg, layout, s, students[s], slot, cfg.run_key, limit_s=limit_s)
            return None
        except Exception as err:  # noqa: BLE001 - one student's failure must not stop the class
            return f"{type(err).__name__}: {err}"

    def record(s: str, why: str | None) -> None:
        # a failure is recorded here, in the main thread, where a stop signal is handled first: a grader
        # process that a Ctrl-C killed is a stopped student (nothing recorded), never a failed one
        if why is not None and not spawn.STOP.is_set():
            result = results.GradingResult.failed(s, cfg.lab, layout, why).to_json()
            results.publish(cfg.out, cfg.lab, cfg.out / "work" / s, s, result, cfg.out / "work" / ".verdict" / s)

    _on_slots(todo, [()] * workers, job, record, f"grading {cfg.lab}", progress)


def _on_slots(todo: list[str], sets: list[tuple[int, ...]], job, record, desc: str, progress: bool) -> None:
    """job(student, slot, cores) for every student of `todo`, len(sets) at a time, each on a worker slot of its
    own (slot j holds set j of cores); record(student, what job returned) in this thread, as each ends, with a
    progress bar. Stopped, the students not started are not started and those in flight end (spawn.STOP)."""
    free = list(enumerate(sets))
    lock = threading.Lock()

    def on_a_slot(s: str):
        with lock:
            slot, own = free.pop()
        try:
            return job(s, slot, own)
        finally:
            with lock:
                free.append((slot, own))

    pool = ThreadPoolExecutor(max_workers=len(sets))
    try:
        futures = {pool.submit(on_a_slot, s): s for s in todo}
        for fut in tqdm(as_completed(futures), total=len(futures), desc=desc, unit="student", disable=not progress):
            record(futures[fut], fut.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def timing_cores(cfg: Config) -> list[tuple[int, ...]]:
    """The disjoint sets of cores of the students timed at once: with --timing-parallel, the cores this process
    may use cut into sets of ceil(Bounds.cpus) cores (the student's CPU bound), one student on each; else one
    set, empty (one student at a time, on any core). One set too where no cpuset holds a student to its cores
    (no control groups, --unsafe)."""
    if not cfg.timing_parallel or cfg.unsafe or not bounds_.cpuset_available() or not bounds_.available()[0]:
        return [()]
    return timing_sets(os.sched_getaffinity(0), cfg.bounds.cpus)


def timing_sets(cores, cpus: float) -> list[tuple[int, ...]]:
    """`cores` cut into disjoint sets of ceil(cpus) cores, one per student timed at once; [()] (one student at a
    time, on any core) when they make fewer than two sets. The rule export/cluster.py sizes a shard by."""
    allowed = sorted(cores)
    k = max(1, math.ceil(cpus))
    sets = [tuple(allowed[j:j + k]) for j in range(0, len(allowed) - k + 1, k)]
    return sets if len(sets) > 1 else [()]


def _time_all(cfg: Config, layout: dict, students: dict, limit_s: float, progress: bool) -> None:
    """The timed cells once every untimed check is over: one student at a time, so that nothing of another
    student runs beside a timing (its own sandbox is frozen while the grader times a baseline); or, with
    --timing-parallel, one student on each set of `timing_cores`, its control group and the grader timing it
    held to those cores (a cpuset), so that nothing of another student runs on them. A timing still unclear
    is timed again at the end, alone, up to cfg.timing_attempts times; then its points are held.
    (A run stopped between the two phases leaves marked cells: the next run times them.)"""
    chosen = [s for s in students if not cfg.only or s in cfg.only]
    again = [s for s in chosen if (r := results.load_result(cfg.out, s)) and results.to_time(r, pending=cfg.retime)]
    parallel = timing_cores(cfg)
    for attempt in range(cfg.timing_attempts):
        if attempt:
            again = [s for s in again if (r := results.load_result(cfg.out, s)) and r.get("pending")]
        cores = parallel if not attempt else [()]  # an unclear timing is timed again alone
        if not again:
            continue
        if len(cores) > 1:
            desc = f"timing, {len(cores)} students at once on cores of their own"
        else:
            desc = "timing, one student at a time" if not attempt else "timing again what stayed unclear"
        _time_students(cfg, layout, students, again, cores, limit_s, desc, progress)


def _time_students(cfg: Config, layout: dict, students: dict, todo: list[str], cores: list[tuple[int, ...]],
                   limit_s: float, desc: str, progress: bool) -> None:
    """Time each student of `todo` in a grader process of its own, one on each set of `cores` at a time (worker
    slot j on set j)."""
    def job(s: str, slot: int, own: tuple[int, ...]) -> None:
        try:
            run = cfg if not own else replace(cfg, bounds=replace(cfg.bounds, cores=own))
            in_own_process("time_student", run, layout, s, students[s], slot, cfg.run_key, limit_s=limit_s)
        except Exception as err:  # noqa: BLE001 - its timed points stay held
            r = results.load_result(cfg.out, s)
            results.save_result(cfg.out, s, results.timing_failed(r, f"{type(err).__name__}: {err}",
                                                                  retime_command(cfg, s)))

    _on_slots(todo, cores, job, lambda s, _: None, desc, progress)
