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


@pytest.mark.skipif(not (GROUPS and MOUNTS), reason=f"no cgroups or tmpfs here: {WHY}")
def test_a_fill_sampled_before_its_folder_is_cleared_is_noted(tmp_path):
    """nbgrader, or the grader's verdict, may empty a filled folder before the watcher's next look: whoever
    clears it samples first, so the note does not depend on when the watcher happened to look."""
    bounded = StudentBounds(Bounds(disk_mb=1), False, [tmp_path / "verdict"])
    try:
        bounded._done.set()  # the watcher stops: only sample() looks
        (s,) = bounded.scratches
        with pytest.raises(OSError, match="No space left"), open(s.path / "fill", "wb") as f:
            f.write(b"x" * (2 << 20))
            f.flush()
        bounded.sample()
        (s.path / "fill").unlink()
        assert s.used_mb() < 0.5 * s.size_mb
        assert sum("filled its folder's 1 MB" in n for n in bounded.notes()) == 1, bounded.notes()
    finally:
        bounded.close()


@pytest.mark.skipif(not (GROUPS and MOUNTS), reason=f"no cgroups or tmpfs here: {WHY}")
def test_a_fill_nobody_sampled_is_not_noted_once_cleared(tmp_path):
    """The other side: without a sample, a fill emptied before anyone looked leaves no trace (which is why
    the verdict samples before it clears its scratch)."""
    bounded = StudentBounds(Bounds(disk_mb=1), False, [tmp_path / "verdict"])
    try:
        bounded._done.set()
        (s,) = bounded.scratches
        with pytest.raises(OSError, match="No space left"), open(s.path / "fill", "wb") as f:
            f.write(b"x" * (2 << 20))
            f.flush()
        (s.path / "fill").unlink()
        assert not any("filled its folder" in n for n in bounded.notes())
    finally:
        bounded.close()


def test_without_the_sandbox_there_are_no_bounds(tmp_path):
    bounded = StudentBounds(Bounds(disk_mb=1), True, [tmp_path / "course"])
    try:
        assert bounded.group is None and bounded.scratches == []
        assert bounded.notes() == [] and bounded.usage() == {}
        bounded.stop()
    finally:
        bounded.close()
    assert not (tmp_path / "course").exists()
