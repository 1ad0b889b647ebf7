"""A class graded in shards on Kubernetes: an Indexed Job of N shards and a plain Job that merges them.

`manifests` builds both as Python objects, `write` dumps them (`yaml.safe_dump`) as grade-job.yaml and
merge-job.yaml, each under a header of comments that say where every figure comes from (safe_dump keeps no
comment, so what a reader of the cluster's copy needs is in annotations too). `instructions` gives the kubectl
commands: apply the grade Job, wait for it to complete, apply the merge Job, wait for it.

What each pod of the grade Job is given, and why:
- `completionMode: Indexed`: pod I runs `grade ... --shard I/N`; the index reaches the command through an
  environment variable set from the pod's `batch.kubernetes.io/job-completion-index` annotation (the downward
  API), which Kubernetes expands where the command writes `$(SHARD_INDEX)`;
- requests equal to limits, CPUs in whole cores (`cluster.resources`): the pod is of the Guaranteed QoS class,
  so a kubelet whose CPU manager policy is `static` gives it cores of its own, and --timing-parallel times one
  student on each;
- `privileged`: the grader runs as root, makes a control group per student under its own (writing the
  pod's /sys/fs/cgroup, read-only otherwise), mounts a size-capped tmpfs per student (CAP_SYS_ADMIN) and
  starts bubblewrap sandboxes, which make user, mount and PID namespaces;
- a PersistentVolumeClaim mounted at one path in every pod, holding the submissions and OUT;
- the pod's process limit is no field of a pod: it is the kubelet's `podPidsLimit`, which must allow
  `Resources.pids` (said in an annotation).
The image must hold a Python that has the course's requirements; the course is in the image (the grader
finds it where `autograder` is installed from, as `grade` does) or on the claim (`--pod-course`).
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath

import yaml

from autograder.export.cluster import Plan, Resources

INDEX_ENV = "SHARD_INDEX"  # set from the completion index; the command names it as $(SHARD_INDEX)
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
VOLUME = "grading"
RETRIES_PER_SHARD = 1  # a failed shard's pod is started again (the grader resumes where it stopped)
WHY_PRIVILEGED = ("the grader runs as root and makes a control group per student (it writes /sys/fs/cgroup), "
                  "mounts a size-capped tmpfs per student (CAP_SYS_ADMIN) and starts bubblewrap sandboxes (user, "
                  "mount and PID namespaces): a privileged container allows all three")
WHY_CPUS = ("requests equal limits, CPUs in whole cores: Guaranteed QoS, so a kubelet with the static CPU manager "
            "policy gives the pod cores of its own, and --timing-parallel times one student on each")


def kube_name(text: str) -> str:
    """A name Kubernetes accepts (RFC 1123 label: lower-case letters, digits and '-', at most 63 characters);
    an Indexed Job's pods add -<index>-<suffix>, so the name is kept to 40."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-")
    if not name:
        raise SystemExit(f"{text!r}: no letter or digit to name a Job with")
    return name


def _resources(r: Resources) -> dict:
    amounts = {"cpu": str(r.cpus), "memory": f"{r.memory_mb}Mi"}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _inside(path: str, mount: str, what: str) -> None:
    """Refuse `path` (as a pod sees it) unless it lies on the claim's mount."""
    if not PurePosixPath(path).is_absolute() or not PurePosixPath(path).is_relative_to(mount):
        raise SystemExit(f"{what} {path}: it must be an absolute path under --mount {mount}, where the claim is "
                         f"mounted in every pod")


def _pod(lab: str, r: Resources, name: str, image: str, claim: str, mount: str, command: list[str],
         env: list[dict], privileged: bool) -> dict:
    """The pod template of a Job: one container asking for `r`, with the claim mounted."""
    container = {"name": name, "image": image, "command": command,
                 "resources": _resources(r),
                 "securityContext": {"privileged": privileged},
                 "volumeMounts": [{"name": VOLUME, "mountPath": mount}]}
    if env:
        container["env"] = env
    return {"metadata": {"labels": {"app.kubernetes.io/name": "speclab-grader", "speclab/lab": kube_name(lab)}},
            "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": r.time_s, "containers": [container],
                     "volumes": [{"name": VOLUME, "persistentVolumeClaim": {"claimName": claim}}]}}


def _metadata(name: str, namespace: str | None, annotations: dict[str, str]) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {}),
            "labels": {"app.kubernetes.io/name": "speclab-grader"}, "annotations": annotations}
    return meta


def manifests(p: Plan, image: str, claim: str, mount: str = "/grading", namespace: str | None = None,
              python: str = "python", course: str | None = None) -> dict[str, dict]:
    """The grade Job (Indexed, N completions, `parallel` at once) and the merge Job of plan `p`, by file name;
    course: the course as the pods see it (None: the grader finds it where the image installed it)."""
    mount = str(PurePosixPath(mount))
    _inside(p.submissions, mount, "SUBMISSIONS")
    _inside(p.out, mount, "--out")
    name = kube_name(f"{p.job_name}-grade")
    on_course = ["--course", course] if course else []
    grade_cmd = [python, "-m", "autograder", *p.grade_args(f"$({INDEX_ENV})"), *on_course]
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}  # the downward API
    grade_env = [{"name": INDEX_ENV, "valueFrom": index}]
    grade = {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": _metadata(name, namespace, {
                 "speclab/why-privileged": WHY_PRIVILEGED,
                 "speclab/why-cpus": WHY_CPUS,
                 "speclab/pids": f"the kubelet's podPidsLimit (no field of a pod) must allow {p.shard.pids} "
                                 f"processes and threads per pod",
                 "speclab/resources": "; ".join(p.why())}),
             "spec": {"completionMode": "Indexed", "completions": p.shards, "parallelism": p.parallel,
                      "backoffLimit": RETRIES_PER_SHARD * p.shards,
                      "template": _pod(p.lab, p.shard, "grader", image, claim, mount,
                                       grade_cmd, grade_env, privileged=True)}}
    merge_name = kube_name(f"{p.job_name}-merge")
    merge = {"apiVersion": "batch/v1", "kind": "Job",
             "metadata": _metadata(merge_name, namespace, {
                 "speclab/why-privileged": "none needed: the merge runs no student code",
                 "speclab/resources": "; ".join(p.merge_why())}),
             "spec": {"completions": 1, "backoffLimit": RETRIES_PER_SHARD,
                      "template": _pod(p.lab, p.merge, "merge", image, claim, mount,
                                       [python, "-m", "autograder", "merge", p.out, *on_course], [],
                                       privileged=False)}}
    return {"grade-job.yaml": grade, "merge-job.yaml": merge}


def header(p: Plan, name: str) -> str:
    """The comment block above a manifest: what it is and where its figures come from."""
    if name == "grade-job.yaml":
        lines = [f"The grading of {p.lab}'s class of {p.class_size} in {p.shards} shards, {p.parallel} at once: pod I "
                 f"runs `grade --shard I/{p.shards}` (autograder/pipeline/shards.py).",
                 "What one shard asks for (autograder/export/cluster.py):", *(f"  {w}" for w in p.why()),
                 "CPUs: " + WHY_CPUS + ".",
                 "Privileged: " + WHY_PRIVILEGED + ".",
                 f"Processes: not a field of a pod; the kubelet's podPidsLimit must allow {p.shard.pids}."]
    else:
        lines = [f"The merge of {p.lab}'s {p.shards} shards into {p.out} (`merge OUT`): apply it once the grade Job "
                 "is complete; it refuses unless every shard finished, from one class and one grading code.",
                 *p.merge_why()]
    return "".join(f"# {line}\n" for line in ["Written by `python -m autograder cluster kubernetes`.", *lines])


def write(p: Plan, dest: Path, image: str, claim: str, mount: str = "/grading", namespace: str | None = None,
          python: str = "python", course: str | None = None) -> list[Path]:
    """Write grade-job.yaml and merge-job.yaml into `dest`."""
    found = manifests(p, image, claim, mount, namespace, python, course)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, manifest in found.items():
        path = dest / name
        path.write_text(header(p, name) + yaml.safe_dump(manifest, sort_keys=False, width=120))
        written.append(path)
    return written


def commands(p: Plan, dest: Path, namespace: str | None = None) -> list[str]:
    """kubectl's commands: the grade Job, a wait as long as its shards can take at worst, the merge Job and its
    wait."""
    ns = f" -n {shlex.quote(namespace)}" if namespace else ""
    grade_wait = p.waves() * p.shard.time_s
    return [f"kubectl apply{ns} -f {shlex.quote(str(dest / 'grade-job.yaml'))}",
            f"kubectl wait{ns} --for=condition=complete job/{kube_name(p.job_name + '-grade')} --timeout={grade_wait}s",
            f"kubectl apply{ns} -f {shlex.quote(str(dest / 'merge-job.yaml'))}",
            f"kubectl wait{ns} --for=condition=complete job/{kube_name(p.job_name + '-merge')} "
            f"--timeout={p.merge.time_s}s"]


def instructions(p: Plan, dest: Path, namespace: str | None = None) -> str:
    """What `cluster kubernetes` prints: what it wrote, what each shard asks for, and how to run it."""
    return "\n".join([f"{p.lab}: a class of {p.class_size} in {p.shards} shard(s) of at most {p.shard.students}, "
                      f"{p.parallel} at once; manifests in {dest}",
                      "each shard asks for:", *(f"  {line}" for line in p.why()),
                      "run:", *(f"  {c}" for c in commands(p, dest, namespace)),
                      f"the merge writes {p.out}/grades.csv"])
