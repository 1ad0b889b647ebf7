"""Stage 3, grade: one student, then a class.

`grade_student` grades one student in a scratch course of its own, in this order:
1. its notebooks are checked and put back on the released skeleton (collect.py, normalise.py);
2. its sandboxes are built once, from explicit arguments (autograder/sandbox/policy.py): one for
   nbgrader and the clean re-run, one under another uid for the grader's verdict;
3. `nbgrader autograde` (nbgrader.py) and the grader's own verdict (judge.py) run side by side;
4. each test cell keeps the lower of nbgrader's score and its second opinion (results.py), a timed
   check that could not decide is noted (the result's `timing`), and the result file is published
   once nothing of the student runs any more.
`grade_class` grades the students W at a time and merges the results (report.py).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from autograder.checks import DEFER_ENV, LAB_CHECKS_ENV, defer_value, hidden, timing
from autograder.inside.timeouts import lab_timeout
from autograder.sandbox import (VERDICT_SLOTS, StudentBox, capabilities, course_mounts, lock_down, no_links,
                                python_paths, require, scratch_path, slot_uids)
from autograder.sandbox import SandboxUnavailable

from . import judge, nbgrader, results
from .collect import check_notebooks, collect, submission_hash
from .config import Config
from .normalise import normalise
from .report import merge


def student_boxes(cfg: Config, slot: int) -> tuple[StudentBox, StudentBox]:
    """(the sandbox of nbgrader and the re-check, the sandbox of the verdict's harness) of a worker slot.
    Only the first may write the graders' timing lock (the verdict's harness never times anything)."""
    lock = cfg.out / "timing.lock"  # every worker's timed checks share it (autograder.checks.timing)
    lock.touch(exist_ok=True)
    try:
        os.chmod(lock, 0o666)  # writable by the sandbox users of all worker slots
    except OSError:
        pass
    env = [(timing.LOCK_ENV, str(lock))]
    if cfg.lab_checks:
        env.append((LAB_CHECKS_ENV, os.pathsep.join(map(str, cfg.lab_checks))))
    nb_uid, verdict_uid = slot_uids(slot)
    box = StudentBox(cfg.code_root, tuple(course_mounts(cfg.code_root, cfg.course_root, cfg.lab_checks)), cfg.limits,
                     nb_uid, cfg.out / "work" / ".logs", shared=(lock,), env_extra=tuple(env), unsafe=cfg.unsafe)
    return box, StudentBox(box.code_root, box.mounts, box.limits, verdict_uid, box.logs, env_extra=box.env_extra,
                           unsafe=box.unsafe, caps=box.caps)


# The hidden inputs' key of each grading run (autograder/checks/hidden.py), by output folder: drawn in this
# process when the run grades its first student, never written to a file, never passed to a sandbox.
_RUN_KEYS: dict[str, bytes] = {}


def grade_student(cfg: Config, layout: dict, student: str, folder: Path, slot: int) -> dict:
    """Grade one student in its own scratch course; write and return its result."""
    t0 = time.perf_counter()
    out, lab, limits, recheck_on = cfg.out, cfg.lab, cfg.limits, cfg.recheck
    cell_timeout = limits.cell_timeout_s or lab_timeout(lab)
    template = out / "template"
    root = out / "work" / student
    verdict_scratch = out / "work" / ".verdict" / student  # beside the course folder, not in it
    box, verdict_box = student_boxes(cfg, slot)
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
    env = box.env(root)

    key = hidden.student_key(_RUN_KEYS.setdefault(str(out), hidden.new_key()), student)

    def verdict(name: str):
        return judge.judge(verdict_box, verdict_scratch, name, pristine[name], set(layout[name]), specs,
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
            # a leaderboard's figures: only of cells with all their points on a clear timing
            kept = {g: v for g, v in measured.items()
                    if scores[name].get(g, 0) >= layout[name][g] and g not in undecided.get(name, {})}
            if kept:
                figures[name] = kept
    result = {
        "student": student, "lab": lab, "submission_sha256": submission_hash(folder),
        "scores": scores, "score": round(sum(sum(c.values()) for c in scores.values()), 6),
        "max_score": sum(sum(c.values()) for c in layout.values()), "problems": problems,
        "seconds": round(time.perf_counter() - t0, 1), "grader_version": version,
        "sandbox": not cfg.unsafe, "sandbox_mode": box.caps.mode if not cfg.unsafe else "none", "timing": undecided,
        "figures": figures,
    }
    results.publish(out, lab, root, student, result, verdict_scratch)  # nothing of the student runs any more
    return result


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

    def job(s: str) -> dict:
        with lock:
            slot = slots.pop()
        try:
            return grade_student(cfg, layout, s, students[s], slot)
        except Exception as err:  # noqa: BLE001 - one student's failure must not stop the class
            result = {"student": s, "lab": cfg.lab, "submission_sha256": "", "seconds": 0.0,
                      "scores": {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}, "score": 0.0,
                      "max_score": sum(sum(c.values()) for c in layout.values()),
                      "problems": [f"grading failed ({type(err).__name__}: {err}); grade this student again"]}
            results.publish(cfg.out, cfg.lab, cfg.out / "work" / s, s, result, cfg.out / "work" / ".verdict" / s)
            return result
        finally:
            with lock:
                slots.append(slot)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(job, s) for s in todo]
        for fut in tqdm(as_completed(futures), total=len(futures), desc=f"grading {cfg.lab}", unit="student",
                        disable=not progress):
            fut.result()
    # A timing that gave no clear verdict is timed again at the end, alone: the class's other students are
    # done, so nothing of theirs runs beside it. Still unclear: its points are held (results.hold_pending).
    if cfg.retime:
        again = [s for s in students if (not cfg.only or s in cfg.only)
                 and (r := results.load_result(cfg.out, s)) and r.get("pending")]
    else:
        again = [s for s in todo if (r := results.load_result(cfg.out, s)) and results.timed_points(r)]
    for s in tqdm(again, desc="timing again, alone", unit="student", disable=not progress or not again):
        result = job(s)
        if results.timed_points(result):
            results.save_result(cfg.out, s, results.hold_pending(result, retime_command(cfg, s)))
    done = [r for s in students if (r := results.load_result(cfg.out, s)) is not None]
    merge(cfg, layout, done, progress)
    return done
