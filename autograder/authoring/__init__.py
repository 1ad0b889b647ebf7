"""Writing labs: `labs.py` builds each lab's nbgrader notebook from its one MyST source and checks it
against the lab's checks module; `reference.py` loads a lab's reference solution as a module (for
the audits and benchmarks, never for grading)."""
