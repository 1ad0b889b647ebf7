"""Hidden checks of `tiny`, the two-cell lab the grading pipeline's tests grade (tests/grading_fixtures.py).

Not a lab of the course: it exists so that the pipeline, the sandbox and the verdict
(autograder/verdict.py) are tested end to end in seconds. A correct `add` and `scale`
pass; everything else fails.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def check_add(add: Callable) -> None:
    assert add(1, 2) == 3
    got = add(-4, 2.5)
    assert got == -1.5, f"add(-4, 2.5) should be -1.5, got {got!r}"


def check_scale(scale: Callable) -> None:
    from scipy import stats

    assert np.array_equal(scale(np.arange(4), -3), np.arange(4) * -3)
    assert float(np.sum(scale(np.ones(3), 0.5))) == 1.5
    assert stats.describe(scale(np.arange(4.0), -3)).mean == -4.5
