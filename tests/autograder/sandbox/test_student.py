"""One student's bounds for a grading phase (autograder/sandbox/student.py): its scratch folders, filled, make
one note; --unsafe makes neither a group nor a scratch."""
from __future__ import annotations

import pytest

from autograder.sandbox.bounds import Bounds, available
from autograder.sandbox.student import StudentBounds

GROUPS, MOUNTS, WHY = available()


@pytest.mark.skipif(not (GROUPS and MOUNTS), reason=f"no cgroups or tmpfs here: {WHY}")
def test_a_student_who_fills_both_its_folders_reads_one_note(tmp_path):
    """nbgrader's run and the grader's each have a scratch folder of the student's: filling both is one note."""
    bounded = StudentBounds(Bounds(disk_mb=1), False, [tmp_path / "course", tmp_path / "verdict"])
    try:
        assert len(bounded.scratches) == 2 and bounded.group is not None
        for s in bounded.scratches:
            with pytest.raises(OSError, match="No space left"), open(s.path / "fill", "wb") as f:
                f.write(b"x" * (2 << 20))
                f.flush()
        notes = bounded.notes()
        assert sum("filled its folder's 1 MB" in n for n in notes) == 1, notes
        assert bounded.usage()["memory_bound_mb"] == Bounds().memory_mb
    finally:
        bounded.close()
    assert bounded.group is None and bounded.scratches == []


def test_without_the_sandbox_there_are_no_bounds(tmp_path):
    bounded = StudentBounds(Bounds(disk_mb=1), True, [tmp_path / "course"])
    try:
        assert bounded.group is None and bounded.scratches == []
        assert bounded.notes() == [] and bounded.usage() == {}
        bounded.stop()
    finally:
        bounded.close()
    assert not (tmp_path / "course").exists()
