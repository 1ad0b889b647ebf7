"""Audits of the grader, never used to grade: the catalog of known-wrong solutions (`mutants/`), the
hidden tests' false-failure bounds and power (`power.py`), what grading a student costs (`cost.py`),
and false failures of the timed checks on a loaded machine (`timing_load.py`)."""
