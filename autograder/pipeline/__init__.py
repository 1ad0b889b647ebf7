"""The instructor's pipeline: a folder (or zip) of submissions -> grades CSV, feedback HTML, summary.

One file per stage, in the order a submission travels (ARCHITECTURE.md draws it):
config.py (the run's `Config`, where the course is) -> collect.py (one folder per student) ->
normalise.py (the lab's cells put back as released) -> grade.py (one student: nbgrader.py runs
`nbgrader autograde` in the student's sandbox while judge.py runs the grader's own verdict; results.py
keeps the lower score per cell and publishes the result file) -> report.py (grades.csv, gradebook.db,
summary) and feedback.py (one offline page per student). schedule.py grades a class: each student in a
grader process of its own (spawn.py), then the timed cells one student at a time.

Grading never loads the reference solutions or the mutants (autograder/authoring, autograder/audit).
"""
from .collect import collect, submission_hash  # noqa: F401
from .config import REPO_ROOT, Config, find_course  # noqa: F401
from .grade import grade_student  # noqa: F401
from .nbgrader import build_template  # noqa: F401
from .normalise import normalise  # noqa: F401
from .report import feedback, merge, summary  # noqa: F401
from .results import load_result, publish  # noqa: F401
from .schedule import grade_class  # noqa: F401
