"""Gradescope's container, emulated around a command on this machine (root, no Docker needed).

- `old_bwrap(folder)`: a bwrap with Ubuntu 22.04's options (0.6.1: no --size), what Gradescope's
  `setup.sh` gets from apt (bwrap_0_6_1.sh in front of the real one);
- `docker_default(cmd, folder)`: the command under Docker's default confinement as far as grading is
  concerned: the 14 capabilities Docker keeps (setpriv's bounding set) and the seccomp rules that
  refuse namespaces and mounts (docker_seccomp.c, compiled here with the system's C compiler);
- `Container(tmp, lab, course)`: a lab's zip installed in a Gradescope tree, `setup.sh` run under all
  of the above, and `grade(upload)` running `run_autograder` on one upload as Gradescope does;
- `memory_limit(mb)`: a cgroup (v2, or v1's memory controller, whichever this machine mounts
  writable) that caps the memory of everything started inside it, as Gradescope's Advanced
  Settings do, and a fake cgroup tree at the same limit for the grader to read
  (SPECLAB_CGROUP_ROOT), since the emulated container has no cgroup namespace of its own.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from load import scaled

HERE = Path(__file__).resolve().parent
# Docker's default capabilities (moby's oci/caps/defaults.go): everything else is dropped
DOCKER_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid", "setfcap",
               "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")


def old_bwrap(folder: Path) -> Path:
    """A bwrap that behaves as Ubuntu 22.04's 0.6.1 (no --size), in folder; returns its path."""
    from autograder.sandbox import bwrap_path

    real = os.environ.get("SPECLAB_REAL_BWRAP") or bwrap_path()
    if real is None:
        raise RuntimeError("no bwrap on this machine to stand behind the 0.6.1 emulation")
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "bwrap"
    shutil.copyfile(HERE / "bwrap_0_6_1.sh", shim)
    shim.chmod(0o755)
    link = folder / "real-bwrap"
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(real)
    return shim


def docker_default(cmd: list[str], folder: Path) -> list[str]:
    """cmd under Docker's default seccomp rules for namespaces and its default capability set."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler to build the seccomp filter (apt-get install gcc)")
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "docker_seccomp"
    if not exe.exists():
        subprocess.run([cc, "-O2", "-o", str(exe), str(HERE / "docker_seccomp.c")], check=True)
    caps = ",".join(["-all", *(f"+{c}" for c in DOCKER_CAPS)])
    # the filter first (installing one needs CAP_SYS_ADMIN, which Docker's set then drops), as Docker's runtime does
    return [str(exe), "setpriv", f"--bounding-set={caps}", "--inh-caps=-all", "--", *cmd]


def _cgroup_parent() -> tuple[Path, str] | None:
    """(a writable cgroup folder to make groups in, 'v2' or 'v1'), or None."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists() and os.access(root, os.W_OK):
        return root, "v2"
    if (root / "memory" / "memory.limit_in_bytes").exists() and os.access(root / "memory", os.W_OK):
        return root / "memory", "v1"
    return None


def can_limit_memory() -> bool:
    return _cgroup_parent() is not None


@contextlib.contextmanager
def memory_limit(mb: int, fake_root: Path):
    """Yield a preexec function that puts a child in a fresh cgroup capped at `mb` MB (no swap), and
    lay out fake_root as the container's /sys/fs/cgroup showing that limit. The group is removed
    at the end; peak use is read into the yielded object's `peak_mb` before."""
    found = _cgroup_parent()
    if found is None:
        raise RuntimeError("no writable cgroup hierarchy with a memory controller")
    parent, version = found
    group = parent / f"speclab-gradescope-{os.getpid()}"
    group.mkdir()
    limit = mb << 20
    if version == "v2":
        (group / "memory.max").write_text(str(limit))
        (group / "memory.swap.max").write_text("0") if (group / "memory.swap.max").exists() else None
        (fake_root / "memory.max").parent.mkdir(parents=True, exist_ok=True)
        (fake_root / "memory.max").write_text(f"{limit}\n")
    else:
        (group / "memory.limit_in_bytes").write_text(str(limit))
        (fake_root / "memory").mkdir(parents=True, exist_ok=True)
        (fake_root / "memory" / "memory.limit_in_bytes").write_text(f"{limit}\n")

    class Group:
        peak_mb = None
        oom_kills = 0

        @staticmethod
        def enter() -> None:  # runs in the child between fork and exec
            (group / "cgroup.procs").write_text(str(os.getpid()))

    try:
        yield Group
    finally:
        peak = group / ("memory.peak" if version == "v2" else "memory.max_usage_in_bytes")
        with contextlib.suppress(OSError, ValueError):
            Group.peak_mb = int(peak.read_text()) / 2**20
        events = group / ("memory.events" if version == "v2" else "memory.oom_control")
        with contextlib.suppress(OSError):
            for line in events.read_text().splitlines():
                if line.startswith("oom_kill "):
                    Group.oom_kills = int(line.split()[1])
        procs = group / "cgroup.procs"
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                import time

                time.sleep(0.1)


class _no_limit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class Container:
    """One lab's zip installed in a Gradescope tree under tmp, with `setup.sh` run under the emulated
    confinement; `grade(folder)` runs `run_autograder` on one upload, as Gradescope does."""

    def __init__(self, tmp: Path, lab: str, course: Path):
        from autograder.export.gradescope import build_zip

        self.tmp, self.lab = tmp, lab
        self.archive = build_zip(course, lab, tmp / f"gradescope-{lab}.zip")
        self.root = root = tmp / "autograder"
        (root / "source").mkdir(parents=True)
        with zipfile.ZipFile(self.archive) as zf:
            modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
            zf.extractall(root / "source")
        for name, mode in modes.items():
            if mode & 0o111:
                os.chmod(root / "source" / name, 0o755)
        shutil.copyfile(root / "source" / "run_autograder", root / "run_autograder")
        os.chmod(root / "run_autograder", 0o755)
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECLAB_SANDBOX")}
        self.tools = tmp / "emulation"
        self.env.update(SPECLAB_GRADESCOPE_ROOT=str(root), SPECLAB_PYTHON=sys.executable,
                        SPECLAB_BWRAP=str(old_bwrap(self.tools / "bwrap-0.6.1")),
                        SPECLAB_CGROUP_ROOT=str(tmp / "cgroup"))
        setup = subprocess.run(self.confined(["bash", str(root / "source" / "setup.sh")]), cwd=root / "source",
                               env=self.env, capture_output=True, text=True, timeout=scaled(900))
        if setup.returncode != 0:
            raise RuntimeError(f"setup.sh failed: {setup.stdout[-3000:]}{setup.stderr[-3000:]}")

    def confined(self, cmd: list[str]) -> list[str]:
        return docker_default(cmd, self.tools)

    def grade(self, folder: Path, name: str) -> tuple[dict, dict]:
        from autograder.export.gradescope import NEEDS_MB

        """(results.json, {stdout, peak_mb, oom_kills, wall_s}) of one upload, in a memory cgroup at NEEDS_MB where
        this machine allows one."""
        root = self.root
        shutil.rmtree(root / "submission", ignore_errors=True)
        shutil.rmtree(root / "results", ignore_errors=True)
        shutil.copytree(folder, root / "submission")
        (root / "results").mkdir()
        limit = memory_limit(NEEDS_MB, self.tmp / "cgroup") if can_limit_memory() else None
        t0 = time.perf_counter()
        with limit or _no_limit() as group:
            proc = subprocess.run(self.confined([str(root / "run_autograder")]), cwd=root, env=self.env,
                                  capture_output=True, text=True, timeout=scaled(1800),
                                  preexec_fn=group.enter if group else None)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"run_autograder failed: {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        data = json.loads((root / "results" / "results.json").read_text())
        run = {"stdout": proc.stdout, "peak_mb": group.peak_mb if group else None,
               "oom_kills": group.oom_kills if group else None, "wall_s": round(wall, 1)}
        print(f"\n===== results.json of {self.lab}'s {name} submission (peak memory {run['peak_mb']} MB of "
              f"{NEEDS_MB if group else 'no limit'})\n" + json.dumps(data, indent=1))
        return data, run
