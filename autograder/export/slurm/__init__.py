"""A class graded in shards on Slurm: an array job of N shards and a merge job that waits for it.

`write` fills the two templates beside this file (`string.Template`, `$name` placeholders) and writes them:
- grade.sbatch: array task I runs `grade LAB SUBMISSIONS --out OUT --shard I/N --timing-parallel`, asking for
  the cores, memory and time of one shard (`cluster.resources`);
- merge.sbatch: `merge OUT`, which refuses unless every shard finished, from one class and one grading code.
`instructions` gives the two commands that submit them, the merge depending on the whole array's success.

sbatch passes the submitting shell's environment to the jobs (its default, --export=ALL): the grader's
variables (SPECLAB_SANDBOX, SPECLAB_LAB_CHECKS, ...) set there reach every shard and the merge.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from string import Template

from autograder.export.cluster import Plan, duration

HERE = Path(__file__).resolve().parent
SCRIPTS = ("grade.sbatch", "merge.sbatch")


def slurm_time(seconds: int) -> str:
    """A Slurm time limit, days-hours:minutes:seconds, rounded up to the minute."""
    minutes = -(-seconds // 60)
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def _directive_value(text: str, what: str) -> str:
    """A value written on an #SBATCH line, which Slurm reads without a shell: refused when it holds a blank
    or a quote, which would cut the line."""
    if any(c.isspace() or c in "'\"" for c in text):
        raise SystemExit(f"{what} {text!r}: an #SBATCH line cannot hold blanks or quotes; choose a path without")
    return text


def _comment(lines: list[str]) -> str:
    return "\n".join(f"#   {line}" for line in lines)


def render(p: Plan, dest: Path, course: Path, python: str, partition: str | None) -> dict[str, str]:
    """The text of each script (name -> text) of plan `p`, to be written into `dest`."""
    logs = _directive_value(str(dest / "logs"), "the log folder")
    common = {"job_name": _directive_value(p.job_name, "the job name"), "logs": logs, "shards": p.shards,
              "partition": f"#SBATCH --partition={_directive_value(partition, '--partition')}" if partition else "",
              "python": shlex.quote(python), "course": shlex.quote(str(course)), "out": shlex.quote(p.out)}
    grade = {**common, "cpus": p.shard.cpus, "memory_mb": p.shard.memory_mb, "time": slurm_time(p.shard.time_s),
             "last": p.shards - 1, "parallel": p.parallel, "script": dest / "grade.sbatch",
             "workers": p.shard.workers, "students": p.shard.students, "why": _comment(p.why()),
             "submissions": shlex.quote(p.submissions), "lab": shlex.quote(p.lab)}
    merge = {**common, "cpus": p.merge.cpus, "memory_mb": p.merge.memory_mb, "time": slurm_time(p.merge.time_s),
             "script": dest / "merge.sbatch", "why": _comment(p.merge_why())}
    return {name: Template((HERE / name).read_text()).substitute(values)
            for name, values in zip(SCRIPTS, (grade, merge))}


def write(p: Plan, dest: Path, course: Path, python: str, partition: str | None = None) -> list[Path]:
    """Write grade.sbatch and merge.sbatch into `dest`, and the logs folder their jobs write to (Slurm does
    not make it)."""
    texts = render(p, dest, course, python, partition)
    (dest / "logs").mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        path = dest / name
        path.write_text(text)
        path.chmod(0o755)
        written.append(path)
    return written


def submit_commands(p: Plan, dest: Path) -> list[str]:
    """The two commands that submit the class: the array (at most `parallel` shards at once), then the merge,
    which starts once every shard has succeeded."""
    return [f"jid=$(sbatch --parsable --array=0-{p.shards - 1}%{p.parallel} {shlex.quote(str(dest / 'grade.sbatch'))})",
            f"sbatch --dependency=afterok:$jid {shlex.quote(str(dest / 'merge.sbatch'))}"]


def instructions(p: Plan, dest: Path) -> str:
    """What `cluster slurm` prints: what it wrote, what each shard asks for, and how to submit."""
    lines = [f"{p.lab}: a class of {p.class_size} in {p.shards} shard(s) of at most {p.shard.students}, "
             f"{p.parallel} at once; scripts in {dest}",
             "each shard asks for:", *(f"  {line}" for line in p.why()),
             f"(a partition whose MaxTime is below {duration(p.shard.time_s)} refuses the shards: more shards make "
             f"each shorter)",
             "submit:", *(f"  {c}" for c in submit_commands(p, dest)),
             f"the merge writes {p.out}/grades.csv; logs in {dest / 'logs'}"]
    return "\n".join(lines)
