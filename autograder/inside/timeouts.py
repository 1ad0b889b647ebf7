"""Each lab's per-cell time limit, shared by the nbgrader configuration and the grading pipeline.

LAB_TIMEOUT: nbgrader's per-cell execution limit (`Execute.timeout`, seconds) per lab;
a lab not listed gets DEFAULT_TIMEOUT. A new lab adds its line here.
"""
LAB_TIMEOUT = {"lab1": 120, "lab2": 360}  # lab1: the sampling cells draw at most 385 800 samples; lab2: at most 39 300 toy decodes, and the timed cell may wait for the graders' timing lock
DEFAULT_TIMEOUT = max(LAB_TIMEOUT.values())


def lab_timeout(lab: str | None) -> int:
    """The per-cell limit of lab (DEFAULT_TIMEOUT for an unknown or missing lab)."""
    return LAB_TIMEOUT.get(lab, DEFAULT_TIMEOUT) if lab else DEFAULT_TIMEOUT
