"""One student's bounds for one grading phase: its control group and its size-capped scratch folders.

`StudentBounds` makes them where the machine allows (bounds.available(): root, control groups writable,
tmpfs mountable), records how full each scratch folder got, says in the student's words what it went
over (`notes`), and undoes both (`close`). How full a folder got is sampled by a watcher thread, and by
`sample()`, which whoever clears a scratch calls first: nbgrader may also delete what filled it between
two of the watcher's samples, so the watcher alone would miss a fill by chance. The pipeline makes one
per phase of a student (the untimed checks, then the timed ones) from the run's `Bounds` and its `unsafe`
switch, never from its Config: the sandbox imports nothing of the project.
"""
from __future__ import annotations

import threading
from pathlib import Path

from .bounds import Bounds, Group, Scratch, available


class StudentBounds:
    """One student's control group and size-capped scratch folders, where the machine allows them;
    unsafe (no sandbox): neither. `close()` undoes both."""

    def __init__(self, bounds: Bounds, unsafe: bool, scratches: list[Path]):
        self.bounds, self.group, self.scratches = bounds, None, []
        if unsafe:
            return
        groups, mounts, _ = available()
        try:
            if groups:
                self.group = Group("student", bounds)
            if mounts:
                for path in scratches:
                    self.scratches.append(Scratch(path, bounds.disk_mb))
        except OSError:
            self.close()
            raise
        self.peak_mb = [0.0] * len(self.scratches)  # what each scratch held at most (nbgrader may delete it all)
        self._done = threading.Event()
        if self.scratches:
            threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self._done.wait(0.25):
            self.sample()

    def sample(self) -> None:
        """Record how full each scratch folder is now: call it before clearing one."""
        for i, s in enumerate(self.scratches):
            try:
                self.peak_mb[i] = max(self.peak_mb[i], s.used_mb())
            except OSError:
                pass

    def notes(self) -> list[str]:
        """What the student went over, in words it reads on its page."""
        b, out = self.bounds, []
        if self.group is not None:
            use = self.group.usage()
            if use["oom_kills"]:
                out.append(f"your code's processes together went over the memory bound of {b.memory_mb} MB "
                           f"({use['oom_kills']} stopped by the kernel): the memory of all your processes and the "
                           f"files they write in /tmp, /dev/shm and your folder count together; the test cells "
                           f"that ran before that count")
            if use["forks_refused"]:
                out.append(f"your code tried to run more than {b.processes} processes and threads at once; "
                           f"{use['forks_refused']} were refused")
        # one note however many of its folders it filled (nbgrader's run and the grader's each have one)
        if any(max(self.peak_mb[i], s.used_mb()) >= 0.98 * s.size_mb for i, s in enumerate(self.scratches)):
            out.append(f"your code filled its folder's {b.disk_mb} MB: writes after that failed "
                       f"(No space left on device)")
        return out

    def usage(self) -> dict:
        return {**self.group.usage(), "memory_bound_mb": self.bounds.memory_mb} if self.group else {}

    def stop(self) -> None:
        """Kill every process of the student that is left."""
        if self.group is not None:
            self.group.kill()

    def finish(self) -> tuple[list[str], dict]:
        """Kill every process of the student that is left; (what it went over, in words, its usage)."""
        self.stop()
        return self.notes(), self.usage()

    def __enter__(self) -> "StudentBounds":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if hasattr(self, "_done"):
            self._done.set()
        if self.group is not None:
            self.group.remove()
            self.group = None
        for s in self.scratches:
            s.close()
        self.scratches = []
