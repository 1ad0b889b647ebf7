"""Clean re-check of an autograded notebook: its cells re-run in a fresh plain interpreter.

Run as `python -I autograder/replay.py NOTEBOOK RESULT.json --root REPO [--cell-timeout S]
[--only GRADE_ID,...]` (inside the sandbox). With --only, the run stops once every test cell
named has run: the cells after the last of them cannot change its result, and re-checking
one cell early in a lab then costs the cells up to it, not the whole notebook.

Why: inside the Jupyter kernel, the student's code runs before the hidden tests in the same
process and can tamper with what decides a pass: hide tracebacks, replace functions of numpy,
scipy.stats, torch or the course's checks, shadow the `autograder` package with files of its
own. Here:
- the protected modules (numpy, scipy, torch if the notebook uses it, autograder) are
  imported and snapshotted BEFORE any student code runs, and restored (module dicts,
  Python functions' code and defaults, Python classes' attributes, sys.modules, sys.path,
  import hooks, builtins) right before every graded test cell;
- a test cell passes iff executing it raises nothing: exceptions are caught by this runner,
  not displayed by anything the student can override;
- the working directory is not on sys.path (-I), so files the notebook wrote cannot
  shadow course modules.
The pipeline keeps, per graded cell, the lower of nbgrader's score and this re-check.
Limit: this is an in-process defence; code written to attack this runner itself (frame
or ctypes tricks) is out of its scope, which a fully out-of-process checker would cover.
"""
from __future__ import annotations

import builtins
import json
import os
import signal
import sys
import types

PROTECTED = ("numpy", "scipy", "torch", "autograder", "json")


def _snapshot(prefixes: tuple[str, ...]):
    mods = {n: m for n, m in sys.modules.items() if n.split(".")[0] in prefixes}
    dicts = {n: dict(vars(m)) for n, m in mods.items()}
    funcs, classes = [], []
    for n, m in mods.items():
        for obj in list(vars(m).values()):
            if isinstance(obj, types.FunctionType) and obj.__module__ and obj.__module__.split(".")[0] in prefixes:
                funcs.append((obj, obj.__code__, obj.__defaults__, obj.__kwdefaults__))
            elif isinstance(obj, type) and obj.__module__.split(".")[0] in prefixes:
                try:
                    classes.append((obj, dict(vars(obj))))
                except TypeError:
                    pass
    return (mods, dicts, funcs, classes, list(sys.path), list(sys.meta_path), list(sys.path_hooks),
            dict(vars(builtins)), prefixes)


def _restore(snap) -> None:
    mods, dicts, funcs, classes, path, meta, hooks, bdict, prefixes = snap
    for name in [n for n in sys.modules if n.split(".")[0] in prefixes and n not in mods]:
        del sys.modules[name]
    sys.modules.update(mods)
    for n, m in mods.items():
        d = vars(m)
        d.clear()
        d.update(dicts[n])
    for fn, code, defaults, kwdefaults in funcs:
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults
    for cls, attrs in classes:
        for key in [k for k in vars(cls) if k not in attrs]:
            try:
                delattr(cls, key)
            except (AttributeError, TypeError):
                pass
        for key, val in attrs.items():
            if key in ("__dict__", "__weakref__") or vars(cls).get(key) is val:
                continue
            try:
                setattr(cls, key, val)
            except (AttributeError, TypeError):
                pass
    sys.path[:], sys.meta_path[:], sys.path_hooks[:] = path, meta, hooks
    b = vars(builtins)
    b.clear()
    b.update(bdict)


class _Shell:
    """Stand-in for get_ipython(): magics and shell escapes do nothing in the re-check."""

    def __getattr__(self, name):
        return lambda *a, **k: None


class CellTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise CellTimeout()


def main(argv: list[str]) -> int:
    nb_path, out_path = argv[0], argv[1]
    root = argv[argv.index("--root") + 1]
    timeout = int(argv[argv.index("--cell-timeout") + 1]) if "--cell-timeout" in argv else 60
    left = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None  # cells still to judge
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, root)
    os.environ.setdefault("MPLBACKEND", "Agg")
    with open(nb_path, encoding="utf-8") as f:
        nb = json.load(f)
    from IPython.core.inputtransformer2 import TransformerManager  # before student code, like the rest

    transform = TransformerManager().transform_cell
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    text = "\n".join("".join(c.get("source", "")) for c in cells)
    prefixes = tuple(p for p in PROTECTED if p != "torch" or "torch" in text)
    for name in ("numpy", "scipy.stats", "torch", "autograder.checks", "matplotlib.pyplot"):
        if name.split(".")[0] in prefixes or name.startswith("matplotlib"):
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - a module the course does not have
                pass
    for c in cells:  # the course's check modules the test cells import
        for line in "".join(c.get("source", "")).splitlines():
            if line.startswith("from autograder.checks import "):
                try:
                    __import__("autograder.checks." + line.split()[3])
                except Exception:  # noqa: BLE001
                    pass
    snap = _snapshot(prefixes)
    write, dumps, fsync = os.write, json.dumps, os.fsync
    out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": lambda: _Shell(),
                "display": print}
    signal.signal(signal.SIGALRM, _alarm)
    devnull = open(os.devnull, "w")
    for c in cells:
        if left is not None and not left:
            break  # every cell asked for has its result
        meta = c.get("metadata", {}).get("nbgrader", {})
        graded = bool(meta.get("grade")) and not meta.get("solution")
        if graded and left is not None:
            left.discard(meta.get("grade_id"))
        if graded:
            _restore(snap)
            signal.signal(signal.SIGALRM, _alarm)
        sys.stdout = sys.stderr = devnull
        error = None
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            exec(compile(transform("".join(c.get("source", ""))), "<cell>", "exec"), ns)  # noqa: S102
        except CellTimeout:
            error = f"CellTimeout: no result within {timeout} s"
        except BaseException as err:  # noqa: BLE001 - the cell's error is its result
            error = f"{type(err).__name__}: {err}"[:500]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if graded:
            line = dumps({"grade_id": meta.get("grade_id"), "passed": error is None, "error": error})
            write(out_fd, (line + "\n").encode())
            fsync(out_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
