"""Shared fixtures: throw-away nbgrader courses (tests/support/courses.py) and the book built once.

tests/support holds the helpers tests import by name; it is put on sys.path here.
"""
from __future__ import annotations

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
        narrowed = [flag for flag, on in (("-k", config.option.keyword), ("-m", config.option.markexpr),
                                          ("--deselect", config.option.deselect),
                                          ("--lf", getattr(config.option, "lf", False)))
                    if on]
        if narrowed:  # a report holds the outcome of every assertion of its audit, never of some
            raise pytest.UsageError(f"--audit {name} runs the whole audit: drop {' '.join(narrowed)}")
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


# The order and grouping of `make test`'s two test processes: tests/support/xdist_groups.py (not an input of any
# audit's report, so tuning it stales none).
from xdist_groups import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: E402,F401
