"""How `make test` shares its tests between its two processes (pytest-xdist), imported by tests/conftest.py."""
from __future__ import annotations

import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

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
