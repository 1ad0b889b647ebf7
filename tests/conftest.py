"""Shared fixtures: throw-away nbgrader courses (tests/support/courses.py) and the book built once.

tests/support holds the helpers tests import by name; it is put on sys.path here.
"""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = Path(__file__).resolve().parent / "support"  # helpers the tests import by name (load, grading_fixtures, ...)
for _path in (ROOT, SUPPORT):
    if str(_path) not in sys.path:  # `autograder` is imported from the checkout
        sys.path.insert(0, str(_path))
from courses import NbgraderCourse, make_course  # noqa: E402,F401 - NbgraderCourse: the fixtures' type
from load import scaled  # noqa: E402

BIN = Path(sys.executable).parent  # the venv's bin: nbgrader, and alembic which the gradebook needs
AUDITS = ROOT / "tests" / "audit"  # `make audit`'s modules: collected only with --audit NAME


def pytest_addoption(parser):
    parser.addoption("--audit", metavar="NAME", default=None,
                     help="run the audit tests/audit/test_NAME.py and write its report (python -m autograder.audit)")


def pytest_configure(config):
    import load

    load.measure_at_start()  # the contention the suite's limits follow, measured once, before any test runs
    name = config.getoption("audit")
    if name:
        from audit_plugin import AuditPlugin

        config.pluginmanager.register(AuditPlugin(name), "speclab-audit")


def pytest_ignore_collect(collection_path, config):
    """tests/audit/ belongs to `make audit`, not `make test`."""
    if collection_path.is_relative_to(AUDITS):
        return not config.getoption("audit") or None
    return None


@pytest.fixture
def nbgrader_course(tmp_path: Path) -> NbgraderCourse:
    return make_course(tmp_path)


@pytest.fixture(scope="session")
def session_course(tmp_path_factory) -> NbgraderCourse:
    """One course for the whole session (expensive autograding runs are shared between tests)."""
    return make_course(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="session")
def fresh_book(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The whole book built from scratch (empty execution cache), once per test session and
    shared by tests/book/test_book.py and tests/book/test_rendering.py: (result, output folder)."""
    out = tmp_path_factory.mktemp("fresh_book")
    result = subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=scaled(1800),
    )
    (out / "build.log").write_text(result.stdout + result.stderr)
    return result, out


# ------------------------------------------------------------------ two test processes (pytest-xdist)
# `make test` runs the suite in two processes (`pytest -n 2`, the scheduler below). Every test of one module
# runs in the same process, so a module's expensive fixture (a graded class) is built once; every module that
# reads the built book joins one group, so the book is built once; the real labs' gradings
# (tests/end_to_end/test_real_labs.py) are a group per lab, so the two labs may grade side by side. The groups
# known to be long are handed out first, so neither process is left with a long one at the end while the other
# waits. A run without -n keeps this order and ignores the groups. The suite starts no deliberate load:
# tests/audit/ (`make audit`) holds what does.
# (pytest-xdist's own `--dist loadgroup` reads `item._nodeid`, which pytest 9.2 no longer uses.)
BOOK_FIXTURES = ("fresh_book", "book_out", "html_root")
PER_PARAMETER = ("tests/end_to_end/test_real_labs.py",)  # one group per parameter (its module fixture's)
# The slowest groups of a quiet run, slowest first (`pytest --durations=0`). pytest-xdist starts each process
# with two groups, the first and third to one, the second and fourth to the other, and hands a process its
# next group only when it is nearly done.
LONG_FIRST = (
    "tests/end_to_end/test_real_labs.py[lab2]",
    "book",
    "tests/autograder/pipeline/test_grade.py",
    "tests/autograder/checks/test_lab2.py",
    "tests/autograder/pipeline/test_isolation.py",
    "tests/end_to_end/test_hostile.py",
    "tests/autograder/checks/test_lab1.py",
    "tests/end_to_end/test_real_labs.py[lab1]",
    "tests/end_to_end/test_install.py",
    "tests/autograder/test_layout.py",
)


@functools.cache
def uses_the_book(path: str) -> bool:
    """Does this test module ask for the built book (one of BOOK_FIXTURES, by name)?"""
    return path.startswith("tests/book/") and any(f in (ROOT / path).read_text() for f in BOOK_FIXTURES)


def group_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path in PER_PARAMETER and nodeid.endswith("]"):
        return f"{path}[{nodeid.rsplit('[', 1)[1]}"
    return "book" if uses_the_book(path) else path


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))  # stable: a module keeps its order


def pytest_xdist_make_scheduler(config, log):
    """Work handed out a group at a time (group_of), in the order above."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    # pytest-xdist would otherwise hand out the groups with the most tests first (--loadscope-reorder, its
    # default), not in the collection's order that pytest_collection_modifyitems gave them
    config.option.loadscopereorder = False
    return ByGroup(config, log)
