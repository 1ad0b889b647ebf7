"""Where the course is, and the nbgrader courses the pipeline and the audits make
(autograder/pipeline/config.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.pipeline import config
from autograder.sandbox import Limits

ROOT = Path(__file__).resolve().parents[3]


def _course(folder: Path) -> Path:
    (folder / "solutions").mkdir(parents=True)
    (folder / "nbgrader_config.py").write_text("c = get_config()\n")
    return folder


def test_the_course_is_found_in_the_documented_order(tmp_path, monkeypatch):
    explicit, env, cwd = _course(tmp_path / "explicit"), _course(tmp_path / "env"), _course(tmp_path / "cwd")
    monkeypatch.setattr(config, "PACKAGE_PARENT", tmp_path / "not-a-course")
    assert config.find_course(explicit, cwd=cwd, env_course=str(env)) == explicit
    assert config.find_course(None, cwd=cwd, env_course=str(env)) == env  # $SPECLAB_COURSE, as the command read it
    monkeypatch.setenv(config.ENV, str(env))  # read by the command line only
    assert config.find_course(None, cwd=cwd / "sub" / "dir") == cwd  # a parent of the working directory
    with pytest.raises(config.CourseNotFound, match="--course DIR"):
        config.find_course(None, cwd=tmp_path)
    with pytest.raises(config.CourseNotFound, match="not a speclab course"):
        config.find_course(tmp_path / "nowhere")


def test_the_installed_checkout_is_a_course():
    assert config.is_course(config.PACKAGE_PARENT) and config.PACKAGE_PARENT == ROOT


def test_write_course_makes_a_course_nbgrader_reads(tmp_path):
    root = config.write_course(tmp_path / "c", ROOT, Limits(cell_timeout_s=7), link_solutions=True)
    text = (root / "nbgrader_config.py").read_text()
    assert f"c.CourseDirectory.root = {str(root)!r}" in text and "c.Execute.timeout = 7" in text
    assert "autograder/inside/nbgrader_config.py" in text
    assert (root / "solutions").resolve() == (ROOT / "solutions").resolve()
    from traitlets.config.loader import PyFileConfigLoader

    loaded = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    assert loaded.CourseDirectory.source_directory == "solutions" and loaded.Execute.timeout == 7


def test_code_root_is_the_course_only_when_it_carries_the_package(tmp_path):
    assert config.Config("lab1", tmp_path, tmp_path, _course(tmp_path / "bare")).code_root == config.REPO_ROOT
    assert config.Config("lab1", tmp_path, tmp_path, ROOT).code_root == ROOT


def test_the_graders_nbgrader_gets_private_folders_and_nothing_of_speclabs_own(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLAB_DEFER_CHECKS", "autograder.checks.lab1:check_sampler")
    monkeypatch.setenv("JUPYTER_TOKEN", "secret")
    env = config.nbgrader_env(tmp_path)
    assert "SPECLAB_DEFER_CHECKS" not in env and "JUPYTER_TOKEN" not in env
    assert env["HOME"] == str(tmp_path / "home") and env["OMP_NUM_THREADS"] == "1"


def test_a_run_s_settings_are_frozen_and_its_key_is_never_printed(tmp_path):
    import dataclasses

    from autograder.inside import clock

    cfg = config.Config("lab1", tmp_path, tmp_path / "out", run_key=b"secret key bytes")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.out = tmp_path  # type: ignore[misc]
    assert "secret key bytes" not in repr(cfg) and "run_key" not in repr(cfg)
    assert (cfg.stretch, cfg.timing_attempts, cfg.sandbox_mode, cfg.bwrap) == (clock.STRETCH, 2, None, None)
    assert dataclasses.replace(cfg, stretch=0.0).run_key == b"secret key bytes" and cfg.stretch == clock.STRETCH
