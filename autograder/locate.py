"""Where the instructor's course is: the folder holding `solutions/` and `nbgrader_config.py`.

The grading commands work from any folder. The course is, in this order:
1. the folder given with `--course DIR`;
2. the folder named by the environment variable SPECLAB_COURSE;
3. the folder the `autograder` package was installed from (an editable install or a checkout);
4. the working directory or one of its parents.
Anything else is an error that says how to name the course.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_PARENT = Path(__file__).resolve().parents[1]
ENV = "SPECLAB_COURSE"


class CourseNotFound(SystemExit):
    """Raised (as a clean exit with a message) when no course folder can be found."""


def is_course(folder: Path) -> bool:
    return (folder / "solutions").is_dir() and (folder / "nbgrader_config.py").is_file()


def find_course(explicit: Path | str | None = None, cwd: Path | None = None) -> Path:
    """The course folder (absolute), following the order in this module's docstring."""
    if explicit is not None:
        folder = Path(explicit).expanduser().resolve()
        if not is_course(folder):
            raise CourseNotFound(f"--course {explicit}: not a speclab course folder (it needs solutions/ "
                                 f"and nbgrader_config.py; give the root of the instructor repository)")
        return folder
    env = os.environ.get(ENV)
    if env:
        folder = Path(env).expanduser().resolve()
        if not is_course(folder):
            raise CourseNotFound(f"{ENV}={env}: not a speclab course folder (it needs solutions/ and "
                                 f"nbgrader_config.py)")
        return folder
    if is_course(PACKAGE_PARENT):
        return PACKAGE_PARENT
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_course(folder):
            return folder
    raise CourseNotFound(
        "cannot find the course (a folder with solutions/ and nbgrader_config.py): the installed "
        f"`autograder` package lives in {PACKAGE_PARENT}, which is not one, and neither is {here} nor any "
        f"of its parents. Pass --course DIR (the root of the instructor repository) or set {ENV}=DIR.")
