"""One release of a lab per test process, copied into every class run's output folder that grades it.

Every class run releases its lab into OUT/template first (`build_template`: `nbgrader generate_assignment`,
a gradebook, 7.9 s here). The pipeline tests grade the tiny lab in ten output folders, so the suite released
the same lab ten times. `seed_template(cfg)` puts a copy of this process's first
release of the same lab into cfg's output folder instead; `build_template`, called by the test or by
`grade_class`, then finds it current by its own stamp (the digest of the lab's source and the course's
configuration) and keeps it. A course whose lab differs (another source, another configuration) gets a
release of its own, and a copy whose stamp `build_template` does not accept is released again by it: the
copy can save work, never change what is graded.

Not an input of any audit's report (autograder/audit/reports.py), so using it stales none.
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from autograder.pipeline import Config, build_template
from autograder.pipeline.collect import submission_hash
from autograder.pipeline.shards import shard_out

_RELEASES: dict[str, Path] = {}  # what the lab's release depends on -> this process's release of it


def _key(cfg: Config) -> str:
    """The lab's name, its source folder's digest (as `build_template` takes it) and the course's configuration."""
    root = Path(cfg.course_root)
    return hashlib.sha256((cfg.lab + submission_hash(root / "solutions" / cfg.lab)
                           + (root / "nbgrader_config.py").read_text()).encode()).hexdigest()


@functools.cache
def _home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="speclab-releases-"))
    atexit.register(shutil.rmtree, home, True)
    return home


def seed_template(cfg: Config) -> None:
    """Copy this process's release of cfg's lab to where the run `cfg` looks for it (OUT/template, or its
    shard's folder's), releasing it first if this process has not yet; a folder that has one keeps it."""
    key = _key(cfg)
    if key not in _RELEASES:
        out = _home() / key[:16]
        build_template(replace(cfg, out=out, shard=None))
        _RELEASES[key] = out / "template"
    out = Path(cfg.out) if cfg.shard is None else shard_out(Path(cfg.out), *cfg.shard)
    if not (out / "template").exists():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(_RELEASES[key], out / "template", symlinks=True)
