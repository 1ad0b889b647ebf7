"""Instructor pipeline: a folder (or zip) of submissions -> grades CSV, feedback HTML, summary.

`grade_class` runs the stages in order, one file each: collect (autograder/collect.py),
normalise (normalise.py), grade (grade.py, with sandbox.py and replay.py), report (report.py);
settings.py holds the run's `Config`.

Design (see autograder/README.md for the instructor's view):
- a template course is built once per lab (`nbgrader generate_assignment` into
  OUT/template): its gradebook lists the notebooks, grade cells and points;
- every student is graded in a scratch course of its own (OUT/work/<student>): a copy of
  the template gradebook, the student's notebooks, `nbgrader autograde` inside the sandbox
  (autograder.sandbox); feedback HTML is generated once from the merged gradebook. No two
  students share a process, a directory or a gradebook, so workers never write the same
  sqlite file; the lab's own cells are first put back as released (`normalise`);
- the grader's own verdict (autograder.verdict): the hidden checks run in the grader's
  process against the student's functions served from a fresh sandbox; a graded cell keeps
  the lower of nbgrader's score and this verdict (autograder.replay re-checks, in the
  sandbox, only cells the grader cannot judge itself);
- the outcome of each student is written atomically to OUT/results/<student>.json by the
  grader once the student's sandbox is gone; that file is the resume point (a student with
  a result for the same submission files AND the same grading code version is skipped
  unless force) and the only input of the merge;
- the merge (grades.csv, gradebook.db, summary) reads the result files in sorted order,
  so it is the same whatever the number of workers or the order they finished in.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from .collect import collect, submission_hash
from . import sandbox
from .grade import VERDICT_SLOTS, build_template, grade_student, grader_version, load_result, publish
from .normalise import normalise
from .report import feedback, merge, summary
from .settings import REPO_ROOT, Config, as_dict

__all__ = ["REPO_ROOT", "Config", "as_dict", "build_template", "collect", "feedback", "grade_class", "grade_student",
           "load_result", "merge", "normalise", "summary"]


def grade_class(cfg: Config, progress: bool = True) -> list[dict]:
    cfg.out = Path(cfg.out).resolve()
    cfg.out.mkdir(parents=True, exist_ok=True)
    students = collect(Path(cfg.submissions), cfg.lab, cfg.out)
    if cfg.only:
        unknown = set(cfg.only) - set(students)
        if unknown:
            raise SystemExit(f"no submission for {sorted(unknown)}")
    if not cfg.unsafe:
        try:
            sandbox.require()
        except sandbox.SandboxUnavailable as err:
            raise SystemExit(str(err)) from None
    layout = build_template(cfg, progress)
    version = grader_version(cfg)
    todo = []
    for s, folder in students.items():
        old = load_result(cfg, s)
        if cfg.only and s not in cfg.only:
            continue
        if old and not cfg.force and old.get("submission_sha256") == submission_hash(folder) \
                and old.get("grader_version") == version and old.get("sandbox", False) >= (not cfg.unsafe):
            continue  # same submission, same grading code (and graded at least as safely): keep
        todo.append(s)
    workers = min(max(1, cfg.workers), VERDICT_SLOTS - 1)  # a uid pair per worker slot (grade.verdict_uid)
    slots = list(range(workers))
    import threading

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
            publish(cfg, cfg.out / "work" / s, s, result)
            return result
        finally:
            with lock:
                slots.append(slot)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(job, s) for s in todo]
        for fut in tqdm(as_completed(futures), total=len(futures), desc=f"grading {cfg.lab}", unit="student",
                        disable=not progress):
            fut.result()
    results = [r for s in students if (r := load_result(cfg, s)) is not None]
    merge(cfg, layout, results, progress)
    return results
