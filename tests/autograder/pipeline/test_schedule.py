"""The class scheduler (autograder/pipeline/schedule.py): the parts that need no class graded. A class graded
end to end is tests/autograder/pipeline/test_grade.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.pipeline.config import Config
from autograder.pipeline.schedule import grade_class, process_limit_s
from autograder.sandbox import Limits


@pytest.mark.parametrize(("stretch", "notebooks", "want"), [
    (2.0, 1, 2 * 3 * 600 + 300),  # nbgrader's run, then the clean re-check, each at 3 x its limit at worst
    (0.0, 1, 2 * 1 * 600 + 300),  # Gradescope's: the limits count wall time
    (2.0, 2, 2 * 3 * 600 * 2 + 300),
    (2.0, 0, 2 * 3 * 600 + 300),  # a lab counts at least one notebook
])
def test_a_grader_process_may_run_as_long_as_its_stretched_limits(tmp_path, stretch, notebooks, want):
    cfg = Config("lab1", tmp_path, tmp_path, limits=Limits(notebook_timeout_s=600), stretch=stretch)
    layout = {f"nb{i}": {"test_a": 1.0} for i in range(notebooks)}
    assert process_limit_s(cfg, layout) == want


def test_a_class_run_leaves_the_settings_it_is_given_as_they_are(tmp_path, monkeypatch):
    """grade_class grades under a copy (its output folder resolved, its key drawn): the caller's Config, a
    relative output folder and no key, is unchanged, here when the run stops at an unknown student."""
    (tmp_path / "subs" / "ada").mkdir(parents=True)
    (tmp_path / "subs" / "ada" / "lab1.ipynb").write_text("{}")
    monkeypatch.chdir(tmp_path)
    cfg = Config("lab1", Path("subs"), Path("out"), only=("nobody",))
    with pytest.raises(SystemExit, match="no submission for"):
        grade_class(cfg, progress=False)
    assert cfg.out == Path("out") and cfg.run_key is None and (tmp_path / "out").is_dir()
