"""What leaves the instructor's repository: the Gradescope autograder zip (`gradescope.py`, which runs
the pipeline inside Gradescope's container) and the student edition (`student_release.py`)."""
