"""What leaves the instructor's repository: the Gradescope autograder zip (`gradescope.py`, which runs
the pipeline inside Gradescope's container), the student edition (`student_release.py`), and the files that
grade a class in shards on a cluster (`cluster.py`: what a shard asks for; `slurm/`, `kubernetes/`)."""
