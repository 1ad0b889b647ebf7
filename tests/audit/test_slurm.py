"""Audit `slurm` (`make audit slurm`): a class graded in shards by a real Slurm gets the grades one run gives it.

A one-node Slurm cluster on this machine, started here and stopped at the end: `munged` with a key of its own,
`slurmctld` and `slurmd` reading a slurm.conf written into a temporary folder (every path of theirs in it, their
ports free ones), the node sized from `slurmd -C`. Debian's `slurm-wlm` and `munge` are installed first where
`slurmctld` is missing (the course's machines are Debian; this needs root, as the grader's control groups do).

The tiny lab's class of six (two correct, two half right, the untouched release, one without a notebook) is
graded as an instructor grades a class on Slurm: `python -m autograder cluster slurm` writes the scripts, and the
two commands it prints submit them, an array of three shards (two at once; one at a time on a 2-core node, since
each shard asks for 2 cores) and the merge that waits for the whole array. The merged grades.csv must be, byte
for byte, the one a single `python -m autograder grade` run writes for the same class; every job must end
COMPLETED; the report holds each student's grade per cell.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest

import grading_fixtures as F
from autograder.pipeline import Config, build_template
from load import scaled

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
PACKAGES = ("slurm-wlm", "munge")  # Debian's: slurmctld, slurmd and the client commands; munged
SHARDS, PARALLEL = 3, 2
FULL = {"test_add": 2.0, "test_scale": 3.0}
HALF = {"test_add": 2.0, "test_scale": 0.0}
NONE = {"test_add": 0.0, "test_scale": 0.0}
MEMORY_MARGIN_MB = 1024  # the node offers the machine's memory less this (slurmd refuses a node larger than it is)
DONE_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
               "BOOT_FAIL", "DEADLINE"}


def run(cmd: list[str], env: dict | None = None, timeout: float = 120, check: bool = True,
        **kw) -> subprocess.CompletedProcess:
    """A command's result; with check, an assertion that shows its output when it fails."""
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    if check:
        assert res.returncode == 0, \
            f"{' '.join(map(str, cmd))} -> {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


# ----------------------------------------------------------------------------- the cluster
@contextmanager
def services_held():
    """While installing: Debian's policy-rc.d answer 101, so that the packages' scripts start no daemon of
    their own (only this audit's run, and they are stopped at its end). Left as found."""
    policy = Path("/usr/sbin/policy-rc.d")
    if policy.exists():
        yield
        return
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    try:
        yield
    finally:
        policy.unlink(missing_ok=True)


def install() -> None:
    """Debian's Slurm and MUNGE, where slurmctld is missing; a failure says what apt-get said."""
    if shutil.which("slurmctld") and shutil.which("munged"):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with services_held():
        res = run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], env, 1800, check=False)
        if res.returncode:  # an empty or stale package index: read it, then try once more
            run(["apt-get", "update"], env, 600)
            run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], env, 1800)
    assert shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("munged"), \
        f"{' '.join(PACKAGES)} installed, yet slurmctld, slurmd or munged is not on PATH"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_line() -> str:
    """This machine as a Slurm node named localhost: its cores as `slurmd -C` counts them, its memory less a
    margin."""
    found = run(["slurmd", "-C"], check=False).stdout
    fields = dict(re.findall(r"(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=(\d+)", found))
    assert {"CPUs", "RealMemory"} <= set(fields), f"slurmd -C said: {found!r}"
    fields["RealMemory"] = str(int(fields["RealMemory"]) - MEMORY_MARGIN_MB)
    return "NodeName=localhost NodeAddr=127.0.0.1 " + " ".join(f"{k}={v}" for k, v in fields.items()) + " State=UNKNOWN"


def slurm_conf(folder: Path, munge_socket: Path) -> str:
    """A one-node cluster on this machine, every file of it under folder."""
    return "\n".join([
        "ClusterName=speclab",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=3600",  # a finished job's state stays readable (scontrol show job) for an hour
        "DependencyParameters=kill_invalid_depend",  # a failed shard cancels the merge instead of holding it
        node_line(),
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def wait_for(what: str, ready, timeout_s: float, logs):
    """Poll `ready()` until it returns something true; an assertion that shows the logs (`logs()`: the files
    to show) if it never does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s\n" + tails(logs()))


def tails(logs: list[Path]) -> str:
    return "\n".join(f"--- {p}:\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.is_file())


def start(cmd: list[str], env: dict, err: Path) -> subprocess.Popen:
    """A daemon in the foreground, its standard error into `err`."""
    with open(err, "w") as f:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=f)


def stop(proc: subprocess.Popen) -> None:
    """End one daemon this audit started, by its process id: SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextmanager
def one_node_slurm():
    """munged, slurmctld and slurmd of this audit, in a temporary folder of their own (short: munge's socket path
    must fit a Unix socket's 108 characters); yields (the environment that reaches them, their folder). Every
    daemon started is stopped at the end, and the jobs it still holds are cancelled first."""
    folder = Path(tempfile.mkdtemp(prefix="speclab-slurm-"))
    folder.chmod(0o711)  # munged refuses a socket whose folders not everyone may pass through
    for sub, mode in (("state", 0o700), ("spool", 0o700), ("munge", 0o711)):
        (folder / sub).mkdir(mode=mode)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))  # what mungekey --create writes: random bytes, readable by its owner only
    key.chmod(0o400)
    sock = folder / "munge" / "munge.socket"
    logs = [folder / f"{d}.{ext}" for d in ("munged", "slurmctld", "slurmd") for ext in ("log", "err")]
    started: list[subprocess.Popen] = []
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    try:
        started.append(start(["munged", "--foreground", f"--socket={sock}", f"--key-file={key}",
                              f"--pid-file={folder / 'munged.pid'}", f"--log-file={folder / 'munged.log'}",
                              f"--seed-file={folder / 'munge' / 'seed'}"], env, folder / "munged.err"))
        wait_for("munged's socket", sock.exists, 30, lambda: logs)
        (folder / "slurm.conf").write_text(slurm_conf(folder, sock))
        for daemon in (["slurmctld", "-D", "-c", "-i"], ["slurmd", "-D", "-c", "-N", "localhost"]):
            started.append(start(daemon, env, folder / f"{daemon[0]}.err"))

        def node_idle() -> bool:
            dead = [p.args[0] for p in started if p.poll() is not None]
            assert not dead, f"{dead} stopped at start\n" + tails(logs)
            res = run(["sinfo", "-h", "-N", "-o", "%N %t"], env, check=False)
            return res.returncode == 0 and res.stdout.split() == ["localhost", "idle"]

        wait_for("the node idle in sinfo", node_idle, scaled(90), lambda: logs)
        yield env, folder
    finally:
        if len(started) == 3 and started[1].poll() is None:  # jobs still held (a failure): end them first
            run(["scancel", "--user=root"], env, check=False)
            wait_for("the cancelled jobs gone", lambda: not run(["squeue", "-h"], env, check=False).stdout.strip(),
                     60, lambda: logs)
        for proc in reversed(started):
            stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


def jobs(env: dict, job: str) -> dict[str, dict[str, str]]:
    """job or array task id -> its fields (JobState, RunTime, ...), as slurmctld holds them."""
    res = run(["scontrol", "-o", "show", "job", job], env, check=False)
    found = {}
    for line in res.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if "JobState" in fields:
            task = fields.get("ArrayTaskId")
            found[fields["JobId"] if task is None else f"{fields.get('ArrayJobId')}_{task}"] = fields
    return found


# ----------------------------------------------------------------------------- the class
def grade_env(env: dict) -> dict:
    """The environment of the grading commands: this checkout's code, the tiny lab's checks (tests/support/
    tiny_lab, outside the package: the command line reads SPECLAB_LAB_CHECKS into its Config)."""
    path = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": path, "SPECLAB_LAB_CHECKS": str(F.TINY), "PYTHONDONTWRITEBYTECODE": "1"}


def tiny_class(base: Path) -> tuple[Path, Path, dict]:
    """The tiny course and its class of six: (course, submissions, student -> expected points per cell)."""
    course = F.make_course(base / "course")
    release_out = base / "release"
    build_template(Config(F.LAB, base / "subs", release_out, course, lab_checks=F.LAB_CHECKS))
    release = nbformat.read(release_out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    variants = {"ada": (F.student(release), FULL), "bo": (F.student(release, F.HALF), HALF),
                "cy": (release, NONE), "di": (F.student(release), FULL), "ed": (None, NONE),
                "flo": (F.student(release, F.HALF), HALF)}
    F.write_variants(base / "subs", release, variants)
    return course, base / "subs", {s: want for s, (_, want) in variants.items()}


class Graded(NamedTuple):
    sharded: Path  # the class's output folder, graded in shards by Slurm and merged
    single: Path  # the output folder of one `grade` run of the same class
    states: dict[str, str]  # each array task's and the merge's final state
    expected: dict[str, dict[str, float]]  # student -> points per cell
    printed: str  # what `cluster slurm` printed
    job_logs: str  # the tails of the jobs' logs


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Graded:
    """The class graded twice: in shards by Slurm, and by one run."""
    if os.geteuid() != 0:
        pytest.skip("a Slurm of its own needs root: its daemons, munge's key, and the grader's control groups")
    install()
    base = tmp_path_factory.mktemp("slurm_class")
    course, subs, expected = tiny_class(base)
    sharded, single = base / "sharded", base / "single"
    with one_node_slurm() as (env, folder):
        genv = grade_env(env)
        written = run([sys.executable, "-m", "autograder", "cluster", "slurm", F.LAB, str(subs), "--out", str(sharded),
                       "--shards", str(SHARDS), "--parallel", str(PARALLEL), "--course", str(course),
                       "--python", sys.executable], genv, cwd=course)
        commands = [line.strip() for line in written.stdout.splitlines() if "sbatch " in line]
        submit = run(["bash", "-c", "set -euo pipefail\n" + "\n".join(commands) + '\necho "array $jid"'], genv,
                     cwd=course)
        array = re.search(r"^array (\d+)", submit.stdout, flags=re.M).group(1)
        merge = re.search(r"Submitted batch job (\d+)", submit.stdout).group(1)

        def logs() -> list[Path]:
            return [folder / "slurmctld.log", folder / "slurmd.log", *sorted((sharded / "slurm" / "logs").glob("*"))]

        def finished() -> dict | None:
            found = {**jobs(env, array), **jobs(env, merge)}
            states = {j: fields["JobState"] for j, fields in found.items()}
            return found if len(states) == SHARDS + 1 and set(states.values()) <= DONE_STATES else None

        found = wait_for("the array and the merge finished", finished, scaled(1800), logs)
        states = {j: fields["JobState"] for j, fields in found.items()}
        for j, fields in found.items():  # how long each took (the merge's against its allowance, MERGE_PER_STUDENT_S)
            print(f"job {j}: {fields['JobState']} in {fields.get('RunTime')} (limit {fields.get('TimeLimit')})")
        job_logs = tails(sorted((sharded / "slurm" / "logs").glob("*.out")))
    run([sys.executable, "-m", "autograder", "grade", F.LAB, str(subs), "--out", str(single), "--course", str(course),
         "--workers", "1"], grade_env(dict(os.environ)), timeout=scaled(1200), cwd=course)
    return Graded(sharded, single, states, expected, written.stdout, job_logs)


def test_the_printed_commands_submit_an_array_and_a_merge_that_waits_for_it(graded):
    assert f"--array=0-{SHARDS - 1}%{PARALLEL}" in graded.printed and "--dependency=afterok:$jid" in graded.printed


def test_every_shard_and_the_merge_completed(graded):
    assert sorted(graded.states.values()) == ["COMPLETED"] * (SHARDS + 1), f"{graded.states}\n{graded.job_logs}"


def test_each_shard_graded_its_own_students(graded):
    seen = []
    for i in range(SHARDS):
        manifest = json.loads((graded.sharded / "shards" / f"{i}-of-{SHARDS}" / "shard.json").read_text())
        assert (manifest["shard"], manifest["of"]) == (i, SHARDS)
        seen += manifest["students"]
    assert sorted(seen) == sorted(graded.expected)


def test_the_merged_grades_are_byte_for_byte_one_run_s(graded, audit_grades):
    sharded, single, expected = graded.sharded, graded.single, graded.expected
    for s, want in expected.items():
        result = json.loads((sharded / "results" / f"{s}.json").read_text())
        audit_grades.student(s, result["scores"][F.LAB], want)
    assert (sharded / "grades.csv").read_bytes() == (single / "grades.csv").read_bytes()
    for s, want in expected.items():
        result = json.loads((sharded / "results" / f"{s}.json").read_text())
        assert result["scores"][F.LAB] == want, (s, result.get("problems"))
        assert (sharded / "feedback" / s).is_dir(), f"no feedback page for {s}"
