"""The policy of a student's sandbox (autograder/sandbox/policy.py), from explicit arguments."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.sandbox import Limits, StudentBox, course_mounts, no_links, scratch_path, slot_uids

ROOT = Path(__file__).resolve().parents[3]


def test_the_sandbox_sees_folders_of_code_and_nothing_of_grading():
    mounts = course_mounts(ROOT, ROOT)
    assert set(mounts) == {ROOT / "nbgrader_config.py", ROOT / "speclab", ROOT / "autograder" / "__init__.py",
                           ROOT / "autograder" / "checks", ROOT / "autograder" / "inside"}
    assert all(p.is_dir() for p in mounts if p.suffix != ".py")


def test_a_lab_outside_the_package_is_mounted_only_when_named(tmp_path):
    assert tmp_path not in course_mounts(ROOT, ROOT)
    assert tmp_path in course_mounts(ROOT, ROOT, (tmp_path,))


def test_every_worker_slot_has_two_uids_of_its_own():
    uids = [u for slot in range(32) for u in slot_uids(slot)]
    assert len(set(uids)) == 64
    with pytest.raises(ValueError, match="at most 32 workers"):
        slot_uids(32)


def test_the_environment_is_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "x")
    box = StudentBox(ROOT, (), Limits(), None, tmp_path / "logs", env_extra=(("SPECLAB_TIMING_LOCK", "/l"),),
                     unsafe=True)
    env = box.env(tmp_path / "s")
    assert "SECRET_TOKEN" not in env and env["SPECLAB_TIMING_LOCK"] == "/l"
    assert env["HOME"] == str(tmp_path / "s" / "home") and env["PYTHONPATH"] == str(ROOT)


def test_scratch_paths_never_go_through_a_link(tmp_path):
    root = tmp_path / "scratch"
    (root / "a").mkdir(parents=True)
    (root / "b").symlink_to(tmp_path)
    assert no_links(root, root / "a" / "f") and not no_links(root, root / "b" / "f")
    p = scratch_path(root, "b", "f")
    assert not (root / "b").is_symlink() and p == root / "b" / "f"
