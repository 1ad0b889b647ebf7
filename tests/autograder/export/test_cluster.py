"""What a class graded in shards asks of a cluster (autograder/export/cluster.py) and the files that ask for it:
the Slurm scripts (autograder/export/slurm/) and the Kubernetes Jobs (autograder/export/kubernetes/).

Every figure a script or manifest carries must be the one `resources()` computes from the grader's own bounds
and limits: the tests compare them, with hand-worked values for the defaults, and change the bounds to see the
files change. Nothing here needs a scheduler; a real Slurm grades a class in the `slurm` audit
(tests/audit/test_slurm.py).
"""
from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from autograder.export import cluster, kubernetes, slurm
from autograder.export.cluster import GRADER_MB, GRADER_PIDS, plan, resources
from autograder.sandbox import Limits
from autograder.sandbox.bounds import Bounds

LAB = "lab1"
# The Kubernetes release whose schemas the manifests are checked against (kubernetes-validate 1.34 and later
# bundle it: requirements.txt).
KUBERNETES = "1.34.0"


# ----------------------------------------------------------------------------- the figures
def test_one_shard_s_request_worked_by_hand_for_the_default_bounds():
    """2 workers, 5 students, one notebook, Bounds() and Limits() as they ship: 1 core, 4096 MB, 512 processes
    per student; each step's limit 2 (nbgrader's run and the re-check) x (1 + stretch 2) x 600 s + 300 s =
    3900 s (schedule.process_limit_s)."""
    assert (Bounds().cpus, Bounds().memory_mb, Bounds().processes, Limits().notebook_timeout_s) == (1.0, 4096, 512, 600)
    r = resources(workers=2, students=5, notebooks=1)
    assert r.cpus == 2 * 1 + 1  # the grader's own core beside its two students'
    # --timing-parallel times a student on each of the 3 cores: 3 students at once, each with its bounds and
    # its grader process
    assert r.at_once == 3
    assert r.memory_mb == 3 * 4096 + (512 + 3 * 512)
    assert r.pids == 3 * 512 + (64 + 3 * 64)
    # the release (600 s), then steps of 3900 s: untimed ceil(5 / 2) = 3; timed on 3 cores one student each,
    # ceil(5 / 3) = 2; timed again, alone, 5
    assert r.step_s == 3900
    assert r.time_s == 600 + (3 + 2 + 5) * 3900


@pytest.mark.parametrize("workers", [1, 3, 8])
def test_the_request_is_the_grader_s_bounds_times_the_workers_plus_the_grader(workers):
    b = Bounds()
    r = resources(workers, students=10, notebooks=2)
    assert r.cpus == workers * math.ceil(b.cpus) + cluster.GRADER_CORES
    assert r.at_once == cluster.timed_at_once(r.cpus, b) == workers + 1  # one timed on the grader's core too
    assert r.memory_mb == r.at_once * b.memory_mb + GRADER_MB.base + GRADER_MB.per_worker * r.at_once
    assert r.pids == r.at_once * b.processes + GRADER_PIDS.base + GRADER_PIDS.per_worker * r.at_once


def test_other_bounds_and_limits_give_another_request():
    """The figures are read from the bounds and limits, never copied: a student of 2 cores and 8 GB, a notebook
    limit of 300 s."""
    wide = resources(1, 4, 1, Bounds(memory_mb=8192, cpus=2.0))
    assert (wide.cpus, wide.memory_mb) == (2 + 1, 8192 + GRADER_MB.of(1))
    short = resources(1, 4, 1, limits=Limits(notebook_timeout_s=300))
    assert short.time_s < resources(1, 4, 1).time_s


@pytest.mark.parametrize(("cpus", "per_student", "at_once"), [(2, 1.0, 2), (3, 1.0, 3), (3, 2.0, 1), (5, 2.0, 2),
                                                               (1, 1.0, 1)])
def test_timing_parallel_times_one_student_per_set_of_its_cores(cpus, per_student, at_once):
    assert cluster.timed_at_once(cpus, Bounds(cpus=per_student)) == at_once


def test_more_notebooks_or_students_take_longer():
    assert resources(2, 5, 2).time_s > resources(2, 5, 1).time_s
    assert resources(2, 6, 1).time_s > resources(2, 5, 1).time_s


def test_a_request_the_grader_cannot_use_is_refused():
    with pytest.raises(ValueError, match="at most 31 students at once"):
        resources(40, 100, 1)
    with pytest.raises(ValueError, match="workers >= 1"):
        resources(0, 5, 1)


@pytest.mark.parametrize(("shards", "parallel", "size", "message"), [
    (7, None, 6, "a shard of nobody"),
    (3, 4, 6, "between 1 and --shards"),
    (0, None, 6, "at least one shard"),
])
def test_a_plan_that_does_not_fit_says_what_to_change(shards, parallel, size, message):
    with pytest.raises(ValueError, match=message):
        plan(LAB, "/subs", "/out", shards, parallel, 1, size, 1)


def test_a_shard_holds_at_most_the_ceiling_of_the_class_over_the_shards():
    p = plan(LAB, "/subs", "/out", 3, 2, 1, 7, 1)  # shards.members: 3, 2 and 2 students
    assert p.shard.students == 3 and p.shard == resources(1, 3, 1)
    assert p.waves() == 2


@pytest.mark.parametrize(("seconds", "text"), [(59, "0-00:01:00"), (3600, "0-01:00:00"), (90061, "1-01:02:00")])
def test_slurm_time_rounds_up_to_the_minute(seconds, text):
    assert slurm.slurm_time(seconds) == text


# ----------------------------------------------------------------------------- Slurm
def fake_course(root: Path) -> Path:
    """A folder `find_course` accepts, whose lab has one notebook."""
    (root / "solutions" / LAB).mkdir(parents=True)
    (root / "solutions" / LAB / f"{LAB}.ipynb").write_text("{}")
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    return root


def directives(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([a-z-]+)=(\S+)$", text, flags=re.M))


def slurm_files(tmp_path: Path, bounds: Bounds | None = None) -> tuple[cluster.Plan, dict[str, str], Path]:
    course = fake_course(tmp_path / "course")
    p = plan(LAB, str(tmp_path / "subs"), str(tmp_path / "out"), 3, 2, 2, 6, 1, bounds)
    dest = tmp_path / "slurm"
    slurm.write(p, dest, course, str(tmp_path / "python"), "debug")
    return p, {name: (dest / name).read_text() for name in slurm.SCRIPTS}, dest


def test_the_sbatch_scripts_are_valid_bash_and_ask_for_what_resources_computes(tmp_path):
    p, texts, dest = slurm_files(tmp_path)
    want = resources(2, 2, 1)
    for name, text in texts.items():
        assert subprocess.run(["bash", "-n", str(dest / name)], capture_output=True).returncode == 0, name
        assert "$" not in "".join(re.findall(r"^#SBATCH .*$", text, flags=re.M)), "a placeholder left unfilled"
    grade = directives(texts["grade.sbatch"])
    assert grade["cpus-per-task"] == str(want.cpus) == "3"
    assert grade["mem"] == f"{want.memory_mb}M" == f"{3 * 4096 + GRADER_MB.of(3)}M"
    assert grade["time"] == slurm.slurm_time(want.time_s)
    assert grade["partition"] == "debug" and grade["output"].endswith("/logs/grade-%A_%a.out")
    merge = directives(texts["merge.sbatch"])
    assert (merge["cpus-per-task"], merge["mem"]) == (str(p.merge.cpus), f"{p.merge.memory_mb}M")
    assert (dest / "logs").is_dir()  # Slurm writes the logs there and does not make the folder


def test_the_sbatch_request_follows_the_bounds(tmp_path):
    _, texts, _ = slurm_files(tmp_path, Bounds(memory_mb=2048, cpus=2.0))
    grade = directives(texts["grade.sbatch"])
    assert (grade["cpus-per-task"], grade["mem"]) == (str(2 * 2 + 1), f"{2 * 2048 + GRADER_MB.of(2)}M")


def stub_python(path: Path) -> None:
    """A stand-in for the grader's Python that prints the arguments it was given, one a line."""
    path.write_text("#!/bin/bash\nprintf '%s\\n' \"$@\"\n")
    path.chmod(0o755)


def test_each_array_task_grades_its_own_shard(tmp_path):
    """The grade script run as Slurm runs array task 1: the grader is called for shard 1 of 3, with its workers
    and --timing-parallel, in the course; without an array index it refuses."""
    p, _, dest = slurm_files(tmp_path)
    stub_python(tmp_path / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    run = subprocess.run(["bash", str(dest / "grade.sbatch")], env={**env, "SLURM_ARRAY_TASK_ID": "1"},
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:-1] == ["-m", "autograder", "grade", LAB, p.submissions, "--out", p.out,
                                           "--course", str(tmp_path / "course"), "--shard", "1/3", "--workers", "2",
                                           "--timing-parallel"]
    alone = subprocess.run(["bash", str(dest / "grade.sbatch")], env=env, capture_output=True, text=True)
    assert alone.returncode != 0 and "submit it with sbatch --array=0-2" in alone.stderr
    merge = subprocess.run(["bash", str(dest / "merge.sbatch")], env=env, capture_output=True, text=True)
    assert merge.stdout.split("\n")[:-1] == ["-m", "autograder", "merge", p.out, "--course", str(tmp_path / "course")]


def test_a_path_with_a_blank_cannot_reach_an_sbatch_line(tmp_path):
    course = fake_course(tmp_path / "course")
    p = plan(LAB, "/subs", "/out", 2, None, 1, 4, 1)
    with pytest.raises(SystemExit, match="cannot hold blanks"):
        slurm.write(p, tmp_path / "my scripts", course, "python")


def test_the_command_line_writes_the_scripts_and_prints_how_to_submit_them(tmp_path, capsys):
    """Through `python -m autograder cluster slurm` (autograder/__main__.py hands it to cluster.main): the class
    counted from the submissions as the grader collects them (six student folders)."""
    from autograder.__main__ import main

    course = fake_course(tmp_path / "course")
    for s in range(6):
        (tmp_path / "subs" / f"s{s}" / LAB).mkdir(parents=True)
        (tmp_path / "subs" / f"s{s}" / LAB / f"{LAB}.ipynb").write_text("{}")
    out = tmp_path / "out"
    assert main(["cluster", "slurm", LAB, str(tmp_path / "subs"), "--out", str(out), "--shards", "3", "--parallel",
                 "2", "--course", str(course)]) == 0
    printed = capsys.readouterr().out
    assert f"jid=$(sbatch --parsable --array=0-2%2 {out / 'slurm' / 'grade.sbatch'})" in printed
    assert f"sbatch --dependency=afterok:$jid {out / 'slurm' / 'merge.sbatch'}" in printed
    assert "a class of 6 in 3 shard(s) of at most 2" in printed
    assert directives((out / "slurm" / "grade.sbatch").read_text())["cpus-per-task"] == str(resources(1, 2, 1).cpus)


def test_submissions_that_are_not_here_need_the_class_size(tmp_path):
    course = fake_course(tmp_path / "course")
    with pytest.raises(SystemExit, match="--students"):
        cluster.main(["slurm", LAB, "/nowhere/subs", "--out", str(tmp_path / "out"), "--shards", "2",
                      "--course", str(course)])


# ----------------------------------------------------------------------------- Kubernetes
def kube_plan(bounds: Bounds | None = None) -> cluster.Plan:
    return plan(LAB, "/grading/subs", "/grading/out", 4, 2, 2, 8, 1, bounds)


def grader_container(manifest: dict) -> dict:
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    return container


def test_the_manifests_pass_kubernetes_own_schemas(tmp_path):
    import kubernetes_validate

    written = kubernetes.write(kube_plan(), tmp_path, "registry.example/speclab:1", "grading-pvc",
                               namespace="course")
    for path in written:
        manifest = yaml.safe_load(path.read_text())
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)  # raises on a field the API does not know


def test_the_schema_check_can_fail():
    """The check above refuses a manifest with a field Kubernetes does not know (strict) or a wrong type."""
    import kubernetes_validate

    grade = kubernetes.manifests(kube_plan(), "img", "pvc")["grade-job.yaml"]
    grade["spec"]["completionMode"] = "Indexed"
    grade["spec"]["parallelism"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(grade, KUBERNETES, strict=True)
    grade["spec"]["parallelism"] = 2
    grader_container(grade)["cpuLimit"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(grade, KUBERNETES, strict=True)


def test_the_grade_job_asks_for_what_resources_computes_as_guaranteed_whole_cores():
    p = kube_plan()
    grade = kubernetes.manifests(p, "img", "pvc")["grade-job.yaml"]
    want = resources(2, 2, 1)
    res = grader_container(grade)["resources"]
    assert res["requests"] == res["limits"] == {"cpu": str(want.cpus), "memory": f"{want.memory_mb}Mi"}
    assert grade["spec"]["template"]["spec"]["activeDeadlineSeconds"] == want.time_s
    assert str(want.pids) in grade["metadata"]["annotations"]["speclab/pids"]
    wide = kubernetes.manifests(kube_plan(Bounds(memory_mb=1024, cpus=3.0)), "img", "pvc")["grade-job.yaml"]
    assert grader_container(wide)["resources"]["limits"] == {"cpu": str(2 * 3 + 1),
                                                             "memory": f"{2 * 1024 + GRADER_MB.of(2)}Mi"}


def test_each_pod_of_the_indexed_job_grades_the_shard_of_its_index():
    p = kube_plan()
    grade = kubernetes.manifests(p, "img", "pvc", mount="/grading")["grade-job.yaml"]
    spec = grade["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 2)
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    c = grader_container(grade)
    assert c["command"] == ["python", "-m", "autograder", "grade", LAB, "/grading/subs", "--out", "/grading/out",
                            "--shard", "$(SHARD_INDEX)/4", "--workers", "2", "--timing-parallel"]
    # Kubernetes expands $(SHARD_INDEX) in a command only for a variable of the container's env
    (env,) = c["env"]
    assert env == {"name": "SHARD_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    assert c["securityContext"] == {"privileged": True}
    assert c["volumeMounts"] == [{"name": "grading", "mountPath": "/grading"}]
    assert spec["template"]["spec"]["volumes"] == [{"name": "grading", "persistentVolumeClaim": {"claimName": "pvc"}}]
    merge = kubernetes.manifests(p, "img", "pvc")["merge-job.yaml"]
    assert grader_container(merge)["command"] == ["python", "-m", "autograder", "merge", "/grading/out"]


def test_the_files_say_why_in_comments_and_annotations(tmp_path):
    p = kube_plan()
    kubernetes.write(p, tmp_path, "img", "pvc")
    text = (tmp_path / "grade-job.yaml").read_text()
    assert text.startswith("# Written by `python -m autograder cluster kubernetes`.")
    assert "podPidsLimit" in text and "static CPU manager" in text and "Privileged: " in text
    annotations = yaml.safe_load(text)["metadata"]["annotations"]
    assert {"speclab/why-privileged", "speclab/why-cpus", "speclab/pids", "speclab/resources"} <= set(annotations)


def test_a_path_off_the_claim_is_refused():
    p = plan(LAB, "/data/subs", "/grading/out", 2, None, 1, 4, 1)
    with pytest.raises(SystemExit, match="under --mount /grading"):
        kubernetes.manifests(p, "img", "pvc", mount="/grading")


def test_the_kubernetes_command_line_prints_apply_wait_apply(tmp_path, capsys):
    course = fake_course(tmp_path / "course")
    assert cluster.main(["kubernetes", LAB, "/grading/subs", "--out", "/grading/out", "--shards", "4", "--parallel",
                         "2", "--workers", "2", "--students", "8", "--image", "img", "--claim", "pvc",
                         "--namespace", "course", "--course", str(course), "--dest", str(tmp_path / "k8s")]) == 0
    printed = capsys.readouterr().out
    p = kube_plan()
    lines = [line.strip() for line in printed.splitlines() if line.strip().startswith("kubectl")]
    assert lines == [f"kubectl apply -n course -f {tmp_path / 'k8s' / 'grade-job.yaml'}",
                     f"kubectl wait -n course --for=condition=complete job/speclab-lab1-grade "
                     f"--timeout={2 * p.shard.time_s}s",
                     f"kubectl apply -n course -f {tmp_path / 'k8s' / 'merge-job.yaml'}",
                     f"kubectl wait -n course --for=condition=complete job/speclab-lab1-merge "
                     f"--timeout={p.merge.time_s}s"]


def test_a_job_name_is_one_kubernetes_accepts():
    assert kubernetes.kube_name("speclab-Lab_2 (draft)-grade") == "speclab-lab-2-draft-grade"
    with pytest.raises(SystemExit):
        kubernetes.kube_name("__")


def test_a_course_on_the_claim_is_named_to_both_jobs():
    jobs = kubernetes.manifests(kube_plan(), "img", "pvc", course="/grading/course")
    for name in ("grade-job.yaml", "merge-job.yaml"):
        assert grader_container(jobs[name])["command"][-2:] == ["--course", "/grading/course"], name
