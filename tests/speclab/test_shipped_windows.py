"""The prompts graded work decodes are shipped with the package, so every machine and Python grades on the
same bytes (the held-out split itself is the local standard library's source)."""
from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import pytest
import torch

from speclab import data

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_windows_are_the_held_out_windows_of_the_python_that_made_them():
    shipped = json.loads(data.SHIPPED.read_text())
    if platform.python_version() != shipped["python"]:
        pytest.skip(f"the windows were taken on Python {shipped['python']}; this is {platform.python_version()}")
    for key, windows in shipped["windows"].items():
        length, seed = map(int, key.split(","))
        assert torch.equal(data.shipped_windows(len(windows), length, seed),
                           data.heldout_windows(len(windows), length, seed=seed))


def test_a_window_not_shipped_is_refused_with_what_is():
    with pytest.raises(ValueError, match=r"shipped \(length, seed\): \[\(24, 3\), \(32, 5\), \(512, 7\)\]"):
        data.shipped_windows(1, 24, seed=4)
    with pytest.raises(ValueError, match="1 of length 32"):
        data.shipped_windows(2, 32, seed=5)


def test_nothing_graded_reads_the_local_standard_library():
    """The hidden checks and the speed test decode shipped windows only (heldout_windows would read this
    machine's own Python sources: another Python, other prompts, other grades)."""
    graded = [*sorted((ROOT / "autograder" / "checks").glob("*.py")), ROOT / "speclab" / "speedtest.py"]
    uses = [p.name for p in graded if re.search(r"\bheldout_windows\b|\bload_split\b|\bheldout_text\b", p.read_text())]
    assert uses == []


def test_the_scan_above_can_fail():
    assert re.search(r"\bheldout_windows\b", "from speclab.data import heldout_windows")
