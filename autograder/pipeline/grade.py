"""Stage 3, grade: one student, then a class.

Each student is graded by a grader process of its own (`in_own_process`), so that a check its code
stalls stalls only that student, and its processes run in a control group of their own
(autograder/sandbox/bounds.py: memory with tmpfs, processes and CPU bounded together, a size-capped
scratch). Grading is in two phases.

`grade_untimed` grades every check except the timed ones, in this order:
1. its notebooks are checked and put back on the released skeleton (collect.py, normalise.py);
2. its sandboxes are built once, from explicit arguments (autograder/sandbox/policy.py): one for
   nbgrader and the clean re-run, one under another uid for the grader's verdict;
3. `nbgrader autograde` (nbgrader.py) and the grader's own verdict (judge.py) run side by side;
4. each test cell keeps the lower of nbgrader's score and its second opinion (results.py); a timed
   cell keeps its points for now and is marked to be timed (results.TIMED_LATER), and the result
   file is published once nothing of the student runs any more.
`time_student` then judges the timed cells alone: in `grade_class`, after every student's untimed
checks are over, one student at a time, so no other student's process exists while it is timed, and
the student's own sandbox is frozen while the grader times its baseline (autograder.checks.timing
.pausing), and the pair (the student's group and the grader's beside it) comes first in the kernel's
share of the CPU, ahead of any outside work (bounds.first_in_line). A timing without a clear verdict
is timed once more, alone, at the end of the run (TIMING_ATTEMPTS); still unclear, its points are held
(results.hold_pending) until `--retime`. `grade_student` runs both phases in this process (Gradescope
grades one student).
`grade_class` grades the students W at a time and merges the results (report.py).
"""
from __future__ import annotations

import functools
import json
import multiprocessing
import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from pathlib import Path

from tqdm import tqdm

from autograder.checks import DEFER_ENV, LAB_CHECKS_ENV, defer_value, hidden
from autograder.inside import clock
from autograder.inside.timeouts import lab_timeout
from autograder.sandbox import (VERDICT_SLOTS, StudentBox, capabilities, course_mounts, lock_down, no_links,
                                python_paths, require, scratch_path, slot_uids)
from autograder.sandbox import SandboxUnavailable
from autograder.sandbox import bounds as bounds_

from . import judge, nbgrader, results
from .collect import check_notebooks, collect, submission_hash
from .config import Config
from .normalise import normalise
from .report import merge


def student_boxes(cfg: Config, slot: int, group=None) -> tuple[StudentBox, StudentBox]:
    """(the sandbox of nbgrader and the re-check, the sandbox of the verdict's harness) of a worker slot;
    group: the student's control group, which both join. No file is writable by two students' sandboxes."""
    env = []
    if cfg.lab_checks:
        env.append((LAB_CHECKS_ENV, os.pathsep.join(map(str, cfg.lab_checks))))
    nb_uid, verdict_uid = slot_uids(slot)
    own = functools.partial(judge.own_clock, group)  # its time limits count the student's own time
    box = StudentBox(cfg.code_root, tuple(course_mounts(cfg.code_root, cfg.course_root, cfg.lab_checks)), cfg.limits,
                     nb_uid, cfg.out / "work" / ".logs", env_extra=tuple(env), unsafe=cfg.unsafe, group=group,
                     clock=own)
    return box, StudentBox(box.code_root, box.mounts, box.limits, verdict_uid, box.logs, env_extra=box.env_extra,
                           unsafe=box.unsafe, caps=box.caps, group=group, clock=own)


class StudentBounds:
    """One student's control group and size-capped scratch folders, where the machine allows them
    (bounds.available(): root, control groups writable, tmpfs mountable); `close()` undoes both."""

    def __init__(self, cfg: Config, scratches: list[Path]):
        self.cfg, self.group, self.scratches = cfg, None, []
        if cfg.unsafe:
            return
        groups, mounts, _ = bounds_.available()
        try:
            if groups:
                self.group = bounds_.Group("student", cfg.bounds)
            if mounts:
                for path in scratches:
                    self.scratches.append(bounds_.Scratch(path, cfg.bounds.disk_mb))
        except OSError:
            self.close()
            raise
        self.peak_mb = [0.0] * len(self.scratches)  # what each scratch held at most (nbgrader may delete it all)
        self._done = threading.Event()
        if self.scratches:
            threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self._done.wait(0.25):
            for i, s in enumerate(self.scratches):
                try:
                    self.peak_mb[i] = max(self.peak_mb[i], s.used_mb())
                except OSError:
                    pass

    def notes(self) -> list[str]:
        """What the student went over, in words it reads on its page."""
        b, out = self.cfg.bounds, []
        if self.group is not None:
            use = self.group.usage()
            if use["oom_kills"]:
                out.append(f"your code's processes together went over the memory bound of {b.memory_mb} MB "
                           f"({use['oom_kills']} stopped by the kernel): the memory of all your processes and the "
                           f"files they write in /tmp, /dev/shm and your folder count together; the test cells "
                           f"that ran before that count")
            if use["forks_refused"]:
                out.append(f"your code tried to run more than {b.processes} processes and threads at once; "
                           f"{use['forks_refused']} were refused")
        # one note however many of its folders it filled (nbgrader's run and the grader's each have one)
        if any(max(self.peak_mb[i], s.used_mb()) >= 0.98 * s.size_mb for i, s in enumerate(self.scratches)):
            out.append(f"your code filled its folder's {b.disk_mb} MB: writes after that failed "
                       f"(No space left on device)")
        return out

    def usage(self) -> dict:
        return {**self.group.usage(), "memory_bound_mb": self.cfg.bounds.memory_mb} if self.group else {}

    def stop(self) -> None:
        """Kill every process of the student that is left."""
        if self.group is not None:
            self.group.kill()

    def close(self) -> None:
        if hasattr(self, "_done"):
            self._done.set()
        if self.group is not None:
            self.group.remove()
            self.group = None
        for s in self.scratches:
            s.close()
        self.scratches = []


# The hidden inputs' key of each grading run (autograder/checks/hidden.py), by output folder: drawn in this
# process when the run grades its first student, never written to a file, never passed to a sandbox.
_RUN_KEYS: dict[str, bytes] = {}


def run_key(cfg: Config) -> bytes:
    """The hidden inputs' key of this grading run (drawn once per output folder, in this process)."""
    return _RUN_KEYS.setdefault(str(Path(cfg.out)), hidden.new_key())


def grade_student(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes | None = None,
                  retime: str | None = None, attempts: int | None = None) -> dict:
    """Grade one student in this process: its untimed checks, then its timed ones, timed again while
    unclear up to `attempts` times (default TIMING_ATTEMPTS); return its result. retime: what a held
    timing's note says to do (default: the --retime command)."""
    key = key if key is not None else run_key(cfg)
    result = grade_untimed(cfg, layout, student, folder, slot, key)
    for _ in range(TIMING_ATTEMPTS if attempts is None else attempts):  # then held pending if still unclear
        if not results.to_time(result):
            break
        result = time_student(cfg, layout, student, folder, slot, key, retime)
    return result


def grade_untimed(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes) -> dict:
    """Grade one student's checks, the timed ones left to `time_student`, in its own scratch course;
    write and return its result. key: the run's hidden-input key (`run_key`)."""
    out = cfg.out
    root = out / "work" / student
    verdict_scratch = out / "work" / ".verdict" / student  # beside the course folder, not in it
    bounded = StudentBounds(cfg, [root, verdict_scratch])
    try:
        return _grade_untimed(cfg, layout, student, folder, slot, key, bounded)
    finally:
        bounded.close()


def _grade_untimed(cfg: Config, layout: dict, student: str, folder: Path, slot: int, run_key_: bytes,
                   bounded: StudentBounds) -> dict:
    t0 = time.perf_counter()
    out, lab, limits, recheck_on = cfg.out, cfg.lab, cfg.limits, cfg.recheck
    cell_timeout = limits.cell_timeout_s or lab_timeout(lab)
    template = out / "template"
    root = out / "work" / student
    verdict_scratch = out / "work" / ".verdict" / student  # beside the course folder, not in it
    box, verdict_box = student_boxes(cfg, slot, bounded.group)
    version = results.grader_version(box.code_root, template, cfg.lab_checks)
    nbgrader.scratch_course(root, cfg.course_root, template, limits)

    # 1. the notebooks, checked and put back on the released skeleton
    usable, problems = check_notebooks(folder, list(layout), limits.file_mb << 20)
    dest = root / "submitted" / student / lab
    dest.mkdir(parents=True)
    pristine: dict[str, str] = {}  # the normalised notebooks, kept out of the students' reach
    for name, path in usable.items():
        release = json.loads((template / "labs" / lab / f"{name}.ipynb").read_text())
        fixed, lines = normalise(json.loads(path.read_bytes()), release)
        problems += [f"{name}.ipynb {line}" for line in lines]
        pristine[name] = json.dumps(fixed, indent=1)
        (dest / f"{name}.ipynb").write_text(pristine[name])
    box.give(root)
    scores = {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}
    undecided: dict[str, dict[str, list[str]]] = {}  # notebook -> grade id -> timings that could not decide
    figures: dict[str, dict[str, dict]] = {}  # notebook -> grade id -> {figure: [value, order]} (timing.figure)
    specs = judge.cell_specs(template / "gradebook.db", lab)
    deferred = judge.deferred_checks(specs) if recheck_on else {}
    timed = judge.timed_cells(deferred)  # judged by time_student, alone (only a deferred cell can wait)
    env = box.env(root)

    key = hidden.student_key(run_key_, student)

    def verdict(name: str):
        return judge.judge(verdict_box, verdict_scratch, name, pristine[name], set(layout[name]) - timed, specs,
                           cell_timeout, limits.notebook_timeout_s, key=key)

    if usable:
        named: dict[str, list[str]] = {}
        for spec in deferred.values():
            named.setdefault(spec.module, []).extend(check for check, _ in spec.calls)
        # 2. nbgrader and the grader's own verdict side by side: they share nothing (the verdict has a
        # scratch folder outside nbgrader's and a uid of its own), and nothing nbgrader wrote is read
        # before both are over
        with ThreadPoolExecutor(max_workers=1) as beside:
            autograde = beside.submit(nbgrader.autograde, box, root, lab, student, {**env, DEFER_ENV: defer_value(named)},
                                      limits.notebook_timeout_s * len(usable) + 60)
            verdicts = {name: verdict(name) for name in usable} if recheck_on else {}
            res = autograde.result()
        try:  # nbgrader's scores, read once its sandbox is gone; the student may have altered them
            if not (root / "gradebook.db").is_file() or not no_links(root, root / "gradebook.db"):
                raise OSError("the scratch gradebook was replaced")
            scores = nbgrader.nbgrader_scores(root / "gradebook.db", lab, student, layout)
            db_ok = True
        except Exception:  # noqa: BLE001 - the notebook may have overwritten its scratch gradebook
            db_ok = False

        # 3. the second opinions, and the lower of the two
        for name in usable:
            graded = root / "autograded" / student / lab / f"{name}.ipynb"
            if res.timed_out:
                problems.append(f"{name}.ipynb: grading stopped at the {limits.notebook_timeout_s} s notebook limit")
            nb_ok = graded.is_file() and no_links(root, graded) and db_ok
            if nb_ok:
                problems += [f"{name}.ipynb {line}" for line in nbgrader.cell_problems(graded)]
            if name in verdicts:
                judged, unjudged, timings, measured = verdicts[name]
            elif not nb_ok:
                judged, unjudged, timings, measured = verdict(name)
            else:
                judged, unjudged, timings, measured = {}, set(layout[name]), {}, {}
            if nb_ok:  # a timed check that ran in the notebook itself printed its undecided timing there
                timings = {**nbgrader.printed_undecided(graded, set(layout[name]) - set(judged)), **timings}
            if timings:
                undecided[name] = {g: timings[g] for g in layout[name] if g in timings}
            opinions = dict(judged)
            if not nb_ok:  # nbgrader gave up (the kernel died): what passed before that counts
                scratch_path(root, "autograded", student, lab).mkdir(parents=True, exist_ok=True)
                scratch_path(root, "autograded", student, lab, f"{name}.ipynb").write_text(pristine[name])
                if unjudged:
                    opinions = {**judge.recheck(box, root, name, pristine[name], unjudged, cell_timeout,
                                                limits.notebook_timeout_s), **judged}
                scores[name] = results.verdict_alone(layout[name], opinions)
                problems.append(f"{name}.ipynb: {nbgrader.why_failed(res.log)}; only the test cells that passed "
                                f"before that count ({sum(scores[name].values()):g} points)")
                problems += results.timing_notes(name, undecided.get(name, {}))
                continue
            rerun = {g for g in unjudged if scores[name][g]}  # the cells only a clean re-run can judge
            if recheck_on and rerun:
                opinions.update({g: v for g, v in judge.recheck(box, root, name, pristine[name], rerun, cell_timeout,
                                                                limits.notebook_timeout_s).items() if g in unjudged})
            scores[name], notes = results.lower_of(name, scores[name], opinions, set(judged), set(deferred))
            problems += notes + results.timing_notes(name, undecided.get(name, {}))
            for g in sorted(timed & set(layout[name])):  # a cell that scored nothing is judged for its message
                undecided.setdefault(name, {})[g] = [results.TIMED_LATER]
            # a leaderboard's figures: only of cells with all their points on a clear timing
            kept = {g: v for g, v in measured.items()
                    if scores[name].get(g, 0) >= layout[name][g] and g not in undecided.get(name, {})}
            if kept:
                figures[name] = kept
    bounded.stop()  # nothing of the student runs any more
    problems += bounded.notes()
    result = {
        "student": student, "lab": lab, "submission_sha256": submission_hash(folder),
        "scores": scores, "score": round(sum(sum(c.values()) for c in scores.values()), 6),
        "max_score": sum(sum(c.values()) for c in layout.values()), "problems": problems,
        "seconds": round(time.perf_counter() - t0, 1), "grader_version": version,
        "sandbox": not cfg.unsafe, "sandbox_mode": box.caps.mode if not cfg.unsafe else "none", "timing": undecided,
        "figures": figures, "bounds": bounded.usage(),
    }
    results.publish(out, lab, root, student, result, verdict_scratch)
    return result


def time_student(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes,
                 retime: str | None = None) -> dict:
    """Judge a graded student's timed cells (those `results.to_time` names: marked by grade_untimed, or
    held pending), in a verdict sandbox of its own, frozen while the grader times a baseline; update and
    return its result. The caller makes sure no other student's code runs meanwhile (grade_class)."""
    from autograder.checks import timing as timing_

    out, lab, limits = cfg.out, cfg.lab, cfg.limits
    result = results.load_result(out, student)
    todo = results.to_time(result or {})
    if not todo:
        return result
    t0 = time.perf_counter()
    template = out / "template"
    verdict_scratch = out / "work" / ".verdict" / student
    specs = judge.cell_specs(template / "gradebook.db", lab)
    usable, _ = check_notebooks(folder, list(layout), limits.file_mb << 20)
    bounded = StudentBounds(cfg, [verdict_scratch])
    try:
        _, verdict_box = student_boxes(cfg, slot, bounded.group)
        pause = bounded.group.frozen if bounded.group is not None else None
        judged_all = {}
        for name, cells in todo.items():
            if name not in usable:
                judged_all[name] = ({g: (False, f"{results.NOT_REACHED} (the notebook is gone)") for g in cells}, {}, {})
                continue
            release = json.loads((template / "labs" / lab / f"{name}.ipynb").read_text())
            fixed, _ = normalise(json.loads(usable[name].read_bytes()), release)
            with timing_.pausing(pause) if pause else nullcontext(), bounds_.beside(bounded.group), \
                    bounds_.first_in_line(bounded.group):
                judged, _, timings, measured = judge.judge(
                    verdict_box, verdict_scratch, name, json.dumps(fixed, indent=1), set(cells), specs,
                    limits.cell_timeout_s or lab_timeout(lab), limits.notebook_timeout_s,
                    key=hidden.student_key(key, student))
            judged_all[name] = (judged, timings, measured)
        bounded.stop()
        result = results.timed(result, todo, judged_all, retime or retime_command(cfg, student))
        result["problems"] += [n for n in bounded.notes() if n not in result["problems"]]  # said once
        result["seconds"] = round(result.get("seconds", 0.0) + time.perf_counter() - t0, 1)
        result["timed_runs"] = result.get("timed_runs", 0) + 1  # how often its timed cells were timed
        result["bounds_timing"] = bounded.usage()
    finally:
        bounded.close()
        shutil.rmtree(verdict_scratch, ignore_errors=True)
    results.save_result(out, student, result)
    return result


# How many times a class run times a student's timed cells, alone: a timing still unclear after the
# first is timed once more at the end of the run (each timing a false failure <= 2.5 % per cell, so
# <= 5 % over both), then its points are held pending until --retime.
TIMING_ATTEMPTS = 2


def retime_command(cfg: Config, student: str) -> str:
    """The command that times a held student's cells again (what the note on their page says)."""
    return f"python -m autograder grade {cfg.lab} {cfg.submissions} --retime --student {student}"


def grade_class(cfg: Config, progress: bool = True) -> list[dict]:
    """Grade every student of cfg.submissions (those without a current result), W at a time; merge."""
    cfg.out = Path(cfg.out).resolve()
    cfg.out.mkdir(parents=True, exist_ok=True)
    students = collect(Path(cfg.submissions), cfg.lab, cfg.out)
    if cfg.only:
        unknown = set(cfg.only) - set(students)
        if unknown:
            raise SystemExit(f"no submission for {sorted(unknown)}")
    mode = sandbox_mode(cfg)
    if progress:
        print(f"sandbox: {mode}", file=sys.stderr)
    uid_mode = not cfg.unsafe and capabilities().mode == "uid"
    umask = os.umask(0o077) if uid_mode else None  # what the grader writes: private to it
    try:
        return _grade_class(cfg, students, progress)
    finally:
        if umask is not None:
            os.umask(umask)


def sandbox_mode(cfg: Config) -> str:
    """The sandbox mode students' code will run in, in words (SystemExit when there is none); in uid mode
    the grading output, the course's secret parts and the submissions are locked down first."""
    if cfg.unsafe:
        return "none (--unsafe): students' code runs with the grader's rights"
    try:
        caps = require()
    except SandboxUnavailable as err:
        raise SystemExit(str(err)) from None
    if caps.mode == "uid":  # lock_down makes the grading output's own folders reachable itself
        lock_down(cfg.out, cfg.course_root, cfg.submissions,
                  [*course_mounts(cfg.code_root, cfg.course_root, cfg.lab_checks), *python_paths()])
    return caps.describe()


def _grade_class(cfg: Config, students: dict, progress: bool) -> list[dict]:
    layout = nbgrader.build_template(cfg, progress)
    version = results.grader_version(cfg.code_root, cfg.out / "template", cfg.lab_checks)
    todo = []
    for s, folder in students.items():
        old = results.load_result(cfg.out, s)
        if cfg.only and s not in cfg.only:
            continue
        if cfg.retime:  # only the students whose timed points are held, graded again below, one at a time
            continue
        if old and not cfg.force and old.get("submission_sha256") == submission_hash(folder) \
                and old.get("grader_version") == version and old.get("sandbox", False) >= (not cfg.unsafe):
            continue  # same submission, same grading code (and graded at least as safely): keep
        todo.append(s)
    workers = min(max(1, cfg.workers), VERDICT_SLOTS - 1)  # a uid pair per worker slot (policy.slot_uids)
    slots = list(range(workers))
    lock = threading.Lock()
    key = run_key(cfg)
    # a stalled grader process, at worst: nbgrader's run (the verdict beside it), then the clean re-check, each
    # at its notebook limit stretched by the time the student waited for a core (autograder/inside/clock.py)
    limit_s = 2 * (1 + clock.STRETCH) * cfg.limits.notebook_timeout_s * max(1, len(layout)) + 300

    def failed(s: str, why: str) -> dict:
        result = {"student": s, "lab": cfg.lab, "submission_sha256": "", "seconds": 0.0,
                  "scores": {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}, "score": 0.0,
                  "max_score": sum(sum(c.values()) for c in layout.values()),
                  "problems": [f"grading failed ({why}); grade this student again"]}
        results.publish(cfg.out, cfg.lab, cfg.out / "work" / s, s, result, cfg.out / "work" / ".verdict" / s)
        return result

    def job(s: str) -> dict:
        with lock:
            slot = slots.pop()
        try:
            return in_own_process("grade_untimed", cfg, layout, s, students[s], slot, key, limit_s=limit_s)
        except Exception as err:  # noqa: BLE001 - one student's failure must not stop the class
            return failed(s, f"{type(err).__name__}: {err}")
        finally:
            with lock:
                slots.append(slot)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(job, s) for s in todo]
        for fut in tqdm(as_completed(futures), total=len(futures), desc=f"grading {cfg.lab}", unit="student",
                        disable=not progress):
            fut.result()
    # The timed cells, one student at a time once every untimed check is over: nothing of another student
    # runs beside a timing (and its own sandbox is frozen while the grader times a baseline). Unclear: held.
    # (a run stopped between the two phases leaves marked cells: they are timed by the next run)
    # A timing still unclear is timed once more, alone, at the end of the class run; then it is held pending.
    chosen = [s for s in students if not cfg.only or s in cfg.only]
    again = [s for s in chosen if (r := results.load_result(cfg.out, s)) and results.to_time(r, pending=cfg.retime)]
    for attempt in range(TIMING_ATTEMPTS):
        if attempt:
            again = [s for s in again if (r := results.load_result(cfg.out, s)) and r.get("pending")]
        desc = "timing, one student at a time" if not attempt else "timing again what stayed unclear"
        for s in tqdm(again, desc=desc, unit="student", disable=not progress or not again):
            try:
                in_own_process("time_student", cfg, layout, s, students[s], 0, key, limit_s=limit_s)
            except Exception as err:  # noqa: BLE001 - its timed points stay held
                r = results.load_result(cfg.out, s)
                results.save_result(cfg.out, s, results.timing_failed(r, f"{type(err).__name__}: {err}",
                                                                      retime_command(cfg, s)))
    done = [r for s in students if (r := results.load_result(cfg.out, s)) is not None]
    merge(cfg, layout, done, progress)
    return done


def in_own_process(what: str, cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes,
                   limit_s: float) -> dict:
    """`grade_untimed` or `time_student` of one student in a grader process of its own (started fresh,
    not forked from this threaded one): a check the student's code stalls, or the memory it takes,
    stalls or takes only that process. The run's key travels through the pipe, never a file. A process
    still running after limit_s seconds is killed, with every process of the student."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, what, cfg, layout, student, folder, slot, key),
                       name=f"speclab grader of {student}")
    proc.start()
    send.close()
    try:
        if not receive.poll(limit_s):
            raise RuntimeError(f"its grader process did not finish within {limit_s:.0f} s")
        ok, value = receive.recv()
    except EOFError:
        proc.join(5)
        raise RuntimeError(f"its grader process ended without a result (exit code {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receive.close()
        bounds_.clean_up_after(proc.pid, [cfg.out / "work" / student, cfg.out / "work" / ".verdict" / student])
    if not ok:
        raise RuntimeError(value)
    return value


def _child(send, what: str, cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes) -> None:
    from autograder.checks import add_folder

    for extra in cfg.lab_checks:  # a lab's checks outside the package, as the class's process found them
        add_folder(extra)
    try:
        if not cfg.unsafe and capabilities().mode == "uid":
            os.umask(0o077)
        send.send((True, globals()[what](cfg, layout, student, folder, slot, key)))
    except BaseException as err:  # noqa: BLE001 - the parent says it on the student's page
        send.send((False, f"{type(err).__name__}: {err}"))
    finally:
        send.close()
