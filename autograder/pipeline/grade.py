"""Stage 3, grade: one student.

A class run (schedule.py) grades each student in a grader process of its own (spawn.py), so that a check its
code stalls stalls only that student, and its processes run in a control group of their own
(autograder/sandbox/student.py: memory with tmpfs, processes and CPU bounded together, a size-capped
scratch). Grading is in two phases.

`grade_untimed` grades every check except the timed ones, in this order (the steps of `_Untimed`):
1. its notebooks are checked and put back on the released skeleton (collect.py, normalise.py);
2. its sandboxes are built once, from explicit arguments (autograder/sandbox/policy.py): one for
   nbgrader and the clean re-run, one under another uid for the grader's verdict;
3. `nbgrader autograde` (nbgrader.py) and the grader's own verdict (judge.py) run side by side;
4. each test cell keeps the lower of nbgrader's score and its second opinion (results.py); a timed
   cell keeps its points for now and is marked to be timed (results.TIMED_LATER), also in a notebook
   nbgrader could not finish, and the result file is published once nothing of the student runs any more.
`time_student` then judges the timed cells alone: in a class run, after every student's untimed
checks are over, one student at a time, so no other student's process exists while it is timed, and
the student's own sandbox is frozen while the grader times its baseline (autograder.checks.timing
.pausing), and the pair (the student's group and the grader's beside it) comes first in the kernel's
share of the CPU, ahead of any outside work (bounds.first_in_line), and while it times, both run on one core
(bounds.one_core, through autograder.checks.timing.pinning: the notebook times its baseline and the student's
code on one core too). A timing without a clear verdict
is timed once more, alone, at the end of the run (Config.timing_attempts); still unclear, its points are
held (results.hold_pending) until `--retime`. With `--timing-parallel` (Config.timing_parallel) the class run
times several students at once instead, each on cores of its own: the student's group and the grader's beside
it are held to them by a cpuset (Bounds.cores, schedule.timing_cores), so no other student's process runs there. `grade_student` runs both phases in this process
(Gradescope grades one student).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.checks import DEFER_ENV, LAB_CHECKS_ENV, defer_value, hidden
from autograder.inside.timeouts import lab_timeout
from autograder.sandbox import Capabilities, StudentBox, capabilities, course_mounts, no_links, scratch_path, slot_uids
from autograder.sandbox import bounds as bounds_
from autograder.sandbox.student import StudentBounds

from . import judge, nbgrader, results
from .collect import check_notebooks, read_notebook, submission_hash
from .config import Config, retime_command
from .normalise import normalise


def sandbox_caps(cfg: Config) -> Capabilities | None:
    """The sandbox mode this run's students' code runs in (None: --unsafe, no sandbox)."""
    return None if cfg.unsafe else capabilities(cfg.sandbox_mode, cfg.bwrap)


def student_boxes(cfg: Config, slot: int, group=None) -> tuple[StudentBox, StudentBox]:
    """(the sandbox of nbgrader and the re-check, the sandbox of the verdict's harness) of a worker slot;
    group: the student's control group, which both join. No file is writable by two students' sandboxes."""
    env = []
    if cfg.lab_checks:
        env.append((LAB_CHECKS_ENV, os.pathsep.join(map(str, cfg.lab_checks))))
    nb_uid, verdict_uid = slot_uids(slot)
    own = functools.partial(judge.own_clock, group)  # its time limits count the student's own time
    box = StudentBox(cfg.code_root, tuple(course_mounts(cfg.code_root, cfg.course_root, cfg.lab_checks)), cfg.limits,
                     nb_uid, cfg.out / "work" / ".logs", env_extra=tuple(env), unsafe=cfg.unsafe,
                     caps=sandbox_caps(cfg), group=group, clock=own, stretch=cfg.stretch)
    return box, replace(box, uid=verdict_uid)


def grade_student(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes | None = None,
                  retime: str | None = None, attempts: int | None = None) -> dict:
    """Grade one student in this process: its untimed checks, then its timed ones, timed again while
    unclear up to `attempts` times (default cfg.timing_attempts); return its result. key: the run's
    hidden-input key (default cfg.run_key, else one drawn for this student's run); retime: what a held
    timing's note says to do (default: the --retime command)."""
    key = key if key is not None else cfg.run_key if cfg.run_key is not None else hidden.new_key()
    result = grade_untimed(cfg, layout, student, folder, slot, key)
    for _ in range(cfg.timing_attempts if attempts is None else attempts):  # then held pending if still unclear
        if not results.to_time(result):
            break
        result = time_student(cfg, layout, student, folder, slot, key, retime)
    return result


def grade_untimed(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes) -> dict:
    """Grade one student's checks, the timed ones left to `time_student`, in its own scratch course;
    write and return its result. key: the run's hidden-input key (Config.run_key)."""
    root = cfg.out / "work" / student
    verdict_scratch = cfg.out / "work" / ".verdict" / student  # beside the course folder, not in it
    with StudentBounds(cfg.bounds, cfg.unsafe, [root, verdict_scratch]) as bounded:
        return _grade_untimed(cfg, layout, student, folder, slot, key, bounded)


def _grade_untimed(cfg: Config, layout: dict, student: str, folder: Path, slot: int, run_key: bytes,
                   bounded: StudentBounds) -> dict:
    t0 = time.perf_counter()
    g = _Untimed.start(cfg, layout, student, slot, run_key, bounded)
    template = cfg.out / "template"
    version = results.grader_version(g.box.code_root, template, cfg.lab_checks)
    nbgrader.scratch_course(g.root, cfg.course_root, template, cfg.limits)
    usable = g.put_back(folder)
    if usable:
        res, verdicts, db_ok = g.side_by_side(usable)
        for name in usable:
            g.second_opinion(name, res, verdicts.get(name), db_ok)
    notes, usage = bounded.finish()  # nothing of the student runs any more
    g.problems += notes
    result = results.GradingResult.graded(
        student, cfg.lab, submission_hash(folder), layout, g.scores, g.problems, round(time.perf_counter() - t0, 1),
        version, None if cfg.unsafe else g.box.caps.mode, g.undecided, g.figures, usage).to_json()
    results.publish(cfg.out, cfg.lab, g.root, student, result, g.verdict_scratch, cfg.limits.kept_mb)
    return result


@dataclass
class _Untimed:
    """One student's untimed grading, step by step: what its steps share and what they find."""

    cfg: Config
    layout: dict  # notebook -> grade id -> points
    student: str
    box: StudentBox  # nbgrader's and the clean re-run's sandbox
    verdict_box: StudentBox  # the verdict harness's
    key: bytes  # the student's hidden-input key (hidden.student_key)
    specs: dict  # grade id -> judge.CellCheck of the cells the verdict can judge
    deferred: dict  # the cells whose checks nbgrader's run leaves to the verdict
    timed: set[str]  # judged by time_student, alone (only a deferred cell can wait)
    bounded: StudentBounds  # its control group and scratch folders (sampled before the verdict clears its own)
    pristine: dict[str, str] = field(default_factory=dict)  # the normalised notebooks, out of the students' reach
    problems: list[str] = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # notebook -> grade id -> points
    undecided: dict = field(default_factory=dict)  # notebook -> grade id -> timings that could not decide
    figures: dict = field(default_factory=dict)  # notebook -> grade id -> {figure: [value, order]} (timing.figure)

    @classmethod
    def start(cls, cfg: Config, layout: dict, student: str, slot: int, run_key: bytes,
              bounded: StudentBounds) -> _Untimed:
        box, verdict_box = student_boxes(cfg, slot, bounded.group)
        specs = judge.cell_specs(cfg.out / "template" / "gradebook.db", cfg.lab)
        deferred = judge.deferred_checks(specs) if cfg.recheck else {}
        return cls(cfg, layout, student, box, verdict_box, hidden.student_key(run_key, student), specs, deferred,
                   judge.timed_cells(deferred), bounded,
                   scores={nb: {g: 0.0 for g in cells} for nb, cells in layout.items()})

    @property
    def root(self) -> Path:
        """The student's scratch course (nbgrader's and the re-run's)."""
        return self.cfg.out / "work" / self.student

    @property
    def verdict_scratch(self) -> Path:
        return self.cfg.out / "work" / ".verdict" / self.student  # beside the course folder, not in it

    @property
    def cell_timeout(self) -> float:
        return self.cfg.limits.cell_timeout_s or lab_timeout(self.cfg.lab)

    def put_back(self, folder: Path) -> dict[str, Path]:
        """1. The notebooks, checked and put back on the released skeleton, in the scratch course: the usable ones."""
        lab, template = self.cfg.lab, self.cfg.out / "template"
        usable, problems = check_notebooks(folder, list(self.layout), self.cfg.limits.file_mb << 20)
        dest = self.root / "submitted" / self.student / lab
        dest.mkdir(parents=True)
        for name, path in usable.items():
            release = json.loads((template / "labs" / lab / f"{name}.ipynb").read_text())
            fixed, lines = normalise(read_notebook(path), release)
            problems += [f"{name}.ipynb {line}" for line in lines]
            self.pristine[name] = json.dumps(fixed, indent=1)
            (dest / f"{name}.ipynb").write_text(self.pristine[name])
        self.box.give(self.root)
        self.problems += problems
        return usable

    def verdict(self, name: str) -> tuple:
        """The grader's own verdict on one notebook (judge.judge), its timed cells left out."""
        limits = self.cfg.limits
        return judge.judge(self.verdict_box, self.verdict_scratch, name, self.pristine[name],
                           set(self.layout[name]) - self.timed, self.specs, self.cell_timeout,
                           limits.notebook_timeout_s, key=self.key, before_clearing=self.bounded.sample)

    def side_by_side(self, usable: dict[str, Path]) -> tuple:
        """2. nbgrader and the grader's own verdict side by side: they share nothing (the verdict has a
        scratch folder outside nbgrader's and a uid of its own), and nothing nbgrader wrote is read before
        both are over. (nbgrader's result, notebook -> verdict, whether nbgrader's scores could be read)."""
        named: dict[str, list[str]] = {}
        for spec in self.deferred.values():
            named.setdefault(spec.module, []).extend(check for check, _ in spec.calls)
        env = {**self.box.env(self.root), DEFER_ENV: defer_value(named)}
        with ThreadPoolExecutor(max_workers=1) as beside:
            autograde = beside.submit(nbgrader.autograde, self.box, self.root, self.cfg.lab, self.student, env,
                                      self.cfg.limits.notebook_timeout_s * len(usable) + 60)
            verdicts = {name: self.verdict(name) for name in usable} if self.cfg.recheck else {}
            res = autograde.result()
        return res, verdicts, self.read_nbgrader_scores()

    def read_nbgrader_scores(self) -> bool:
        """nbgrader's scores, read once its sandbox is gone; False when the student may have altered them."""
        db = self.root / "gradebook.db"
        try:
            if not db.is_file() or not no_links(self.root, db):
                raise OSError("the scratch gradebook was replaced")
            self.scores = nbgrader.nbgrader_scores(db, self.cfg.lab, self.student, self.layout)
            return True
        except Exception:  # noqa: BLE001 - the notebook may have overwritten its scratch gradebook
            return False

    def second_opinion(self, name: str, res, verdict: tuple | None, db_ok: bool) -> None:
        """3. The second opinions on one notebook (the verdict, else a clean re-run), and the lower of the two."""
        cells = self.layout[name]
        graded = self.root / "autograded" / self.student / self.cfg.lab / f"{name}.ipynb"
        if res.timed_out:
            self.problems.append(f"{name}.ipynb: grading stopped at the {self.cfg.limits.notebook_timeout_s} s "
                                 f"notebook limit")
        nb_ok = graded.is_file() and no_links(self.root, graded) and db_ok
        if nb_ok:
            self.problems += [f"{name}.ipynb {line}" for line in nbgrader.cell_problems(graded)]
        if verdict is None:
            verdict = self.verdict(name) if not nb_ok else ({}, set(cells), {}, {})
        judged, unjudged, timings, measured = verdict
        if nb_ok:  # a timed check that ran in the notebook itself printed its undecided timing there
            timings = {**nbgrader.printed_undecided(graded, set(cells) - set(judged)), **timings}
        if timings:
            self.undecided[name] = {g: timings[g] for g in cells if g in timings}
        if nb_ok:
            self.lower(name, judged, unjudged, measured)
        else:
            self.gave_up(name, res, judged, unjudged)

    def recheck(self, name: str, only: set[str]) -> dict:
        return judge.recheck(self.box, self.root, name, self.pristine[name], only, self.cell_timeout,
                             self.cfg.limits.notebook_timeout_s)

    def gave_up(self, name: str, res, judged: dict, unjudged: set[str]) -> None:
        """nbgrader gave up on the notebook (the kernel died): what passed its second opinion before that counts,
        and its timed cells are timed like anyone's (a timed cell is never 0 for want of a timing)."""
        lab, student = self.cfg.lab, self.student
        scratch_path(self.root, "autograded", student, lab).mkdir(parents=True, exist_ok=True)
        scratch_path(self.root, "autograded", student, lab, f"{name}.ipynb").write_text(self.pristine[name])
        opinions = {**self.recheck(name, unjudged), **judged} if unjudged else dict(judged)
        self.scores[name] = results.verdict_alone(self.layout[name], opinions)
        timed = sorted(self.timed & set(self.layout[name]))
        later = f"; its timed cells ({', '.join(timed)}) are timed after the class's other checks" if timed else ""
        self.problems.append(f"{name}.ipynb: {nbgrader.why_failed(res.log)}; only the test cells that passed "
                             f"before that count ({sum(self.scores[name].values()):g} points){later}")
        self.problems += results.timing_notes(name, self.undecided.get(name, {}))
        for g in timed:  # judged by time_student like any other: the timing decides, never the crash
            self.scores[name][g] = float(self.layout[name][g])
        self.time_later(name)

    def time_later(self, name: str) -> None:
        """Mark the notebook's timed cells to be judged by time_student, after the class's other checks."""
        for g in sorted(self.timed & set(self.layout[name])):
            self.undecided.setdefault(name, {})[g] = [results.TIMED_LATER]

    def lower(self, name: str, judged: dict, unjudged: set[str], measured: dict) -> None:
        """Each cell of a notebook nbgrader finished keeps the lower of nbgrader's score and its second opinion."""
        cells, opinions = self.layout[name], dict(judged)
        rerun = {g for g in unjudged if self.scores[name][g]}  # the cells only a clean re-run can judge
        if self.cfg.recheck and rerun:
            rechecked = self.recheck(name, rerun)
            # a cell the re-run recorded nothing for has no second opinion: it never keeps nbgrader's score,
            # which came from a kernel the student controlled
            opinions.update({g: rechecked.get(g, (False, f"{results.NOT_REACHED} (the clean re-run of the "
                                                          f"notebook recorded nothing for this cell)"))
                             for g in rerun})
        self.scores[name], notes = results.lower_of(name, self.scores[name], opinions, set(judged), set(self.deferred))
        self.problems += notes + results.timing_notes(name, self.undecided.get(name, {}))
        self.time_later(name)  # a cell that scored nothing is judged too, for its message
        # a leaderboard's figures: only of cells with all their points on a clear timing
        kept = {g: v for g, v in measured.items()
                if self.scores[name].get(g, 0) >= cells[g] and g not in self.undecided.get(name, {})}
        if kept:
            self.figures[name] = kept


def time_student(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes,
                 retime: str | None = None) -> dict:
    """Judge a graded student's timed cells (those `results.to_time` names: marked by grade_untimed, or
    held pending), in a verdict sandbox of its own, frozen while the grader times a baseline; update and
    return its result. The caller makes sure no other student's code runs meanwhile (schedule.grade_class)."""
    out = cfg.out
    result = results.load_result(out, student)
    todo = results.to_time(result or {})
    if not todo:
        return result
    t0, since = time.perf_counter(), time.time()
    verdict_scratch = out / "work" / ".verdict" / student
    try:
        with StudentBounds(cfg.bounds, cfg.unsafe, [verdict_scratch]) as bounded:
            judged_all = _time_cells(cfg, layout, student, folder, slot, hidden.student_key(key, student), todo,
                                     bounded)
            notes, usage = bounded.finish()
        timed = results.GradingResult.from_json(
            results.timed(result, todo, judged_all, retime or retime_command(cfg, student)))
        result = replace(timed, problems=timed.problems + [n for n in notes if n not in timed.problems],
                         seconds=round(timed.seconds + time.perf_counter() - t0, 1),
                         timed_runs=(timed.timed_runs or 0) + 1,  # how often its timed cells were timed
                         # and where and when: the cores its timing was held to (none: any), the seconds since the epoch
                         bounds_timing={**usage, "cores": list(cfg.bounds.cores), "timed_from": round(since, 3),
                                        "timed_to": round(time.time(), 3)}).to_json()
    finally:
        shutil.rmtree(verdict_scratch, ignore_errors=True)
    results.save_result(out, student, result)
    return result


def _time_cells(cfg: Config, layout: dict, student: str, folder: Path, slot: int, key: bytes, todo: dict,
                bounded: StudentBounds) -> dict[str, tuple[dict, dict, dict]]:
    """notebook -> (grade id -> (passed, error), grade id -> notes of an unclear timing, grade id -> figures)
    of the cells `todo` names, each notebook judged in the verdict sandbox, the student's own group frozen
    while the grader times a baseline. key: the student's hidden-input key."""
    from autograder.checks import timing as timing_

    lab, limits, template = cfg.lab, cfg.limits, cfg.out / "template"
    verdict_scratch = cfg.out / "work" / ".verdict" / student
    specs = judge.cell_specs(template / "gradebook.db", lab)
    usable, _ = check_notebooks(folder, list(layout), limits.file_mb << 20)
    _, verdict_box = student_boxes(cfg, slot, bounded.group)
    pause = bounded.group.frozen if bounded.group is not None else None
    # how long the student's code worked: its group's CPU time as the kernel counts it, else the wall clock
    work = bounded.group.cpu_seconds if bounded.group is not None else time.perf_counter
    judged_all = {}
    for name, cells in todo.items():
        if name not in usable:
            judged_all[name] = ({g: (False, f"{results.NOT_REACHED} (the notebook is gone)") for g in cells}, {}, {})
            continue
        release = json.loads((template / "labs" / lab / f"{name}.ipynb").read_text())
        fixed, _ = normalise(read_notebook(usable[name]), release)
        with timing_.pausing(pause) if pause else nullcontext(), \
                timing_.student_clock(work, cpu=bounded.group is not None), \
                timing_.pinning(functools.partial(bounds_.one_core, bounded.group)), \
                bounds_.beside(bounded.group), bounds_.first_in_line(bounded.group):
            judged, _, timings, measured = judge.judge(
                verdict_box, verdict_scratch, name, json.dumps(fixed, indent=1), set(cells), specs,
                limits.cell_timeout_s or lab_timeout(lab), limits.notebook_timeout_s, key=key,
                before_clearing=bounded.sample)
        judged_all[name] = (judged, timings, measured)
    return judged_all
