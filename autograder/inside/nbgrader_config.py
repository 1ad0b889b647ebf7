"""nbgrader configuration of the speclab course (loaded by the root nbgrader_config.py).

It lives in autograder/inside/ because the nbgrader run in a student's sandbox reads it.

Course root: the directory nbgrader runs in (the repository root for `make labs`
and `make grade`; a temporary folder in the tests). Source notebooks live in
`solutions/<lab>/` (built from `<lab>.md` by `python -m autograder.authoring.labs`), student versions in `labs/<lab>/`; submitted/, autograded/,
feedback/ and gradebook.db are instructor-private (git-ignored).

The kernels that autograde notebooks must import `autograder.checks`, so the
repository root is put on their PYTHONPATH (the kernel's working directory is the
submission's folder, not the repository).
"""
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:  # nbgrader runs this file from wherever the course is
    sys.path.insert(0, REPO_ROOT)

# Per-cell execution time limits (seconds) per lab: Execute.timeout is per cell in
# nbgrader 0.9 (the older ExecutePreprocessor.timeout key is ignored).
from autograder.inside.timeouts import LAB_TIMEOUT, lab_timeout  # noqa: E402


def _lab_from_argv(argv):
    """The assignment id on the command line, if it names a known lab."""
    for arg in argv[1:]:
        for part in arg.split("="):
            if part in LAB_TIMEOUT:
                return part
    return None


c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

c.CourseDirectory.course_id = "speclab"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# only the notebooks travel from solutions/<lab>/ to labs/<lab>/ (not the MyST source <lab>.md)
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]

c.Execute.timeout = lab_timeout(_lab_from_argv(sys.argv))
c.Execute.interrupt_on_timeout = True

# Student versions: solutions become this stub, hidden tests disappear.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

_path = os.environ.get("PYTHONPATH", "")
if REPO_ROOT not in _path.split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join([REPO_ROOT] + ([_path] if _path else []))
