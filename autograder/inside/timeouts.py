"""Each lab's per-cell time limit, shared by the nbgrader configuration and the grading pipeline.

LAB_TIMEOUT: nbgrader's per-cell execution limit (`Execute.timeout`, seconds) per lab;
a lab not listed gets DEFAULT_TIMEOUT. A new lab adds its line here.
"""
# lab1: the slowest cells are the two sampling cells' exactness checks (their 32,000-token cases among them);
# lab2: the sampling cell's decodes, and the timed cell may wait for the graders' timing lock. The
# lab1_nbgrader and lab2_class audits grade each reference under these limits.
LAB_TIMEOUT = {"lab1": 120, "lab2": 360}
DEFAULT_TIMEOUT = max(LAB_TIMEOUT.values())


def lab_timeout(lab: str | None) -> int:
    """The per-cell limit of lab (DEFAULT_TIMEOUT for an unknown or missing lab)."""
    return LAB_TIMEOUT.get(lab, DEFAULT_TIMEOUT) if lab else DEFAULT_TIMEOUT
