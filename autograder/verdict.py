"""A verdict student code cannot reach: the checks run in the grader's process, the student's
functions in the sandbox, and only plain, validated values cross between them.

How a notebook is judged (`judge`):
1. A harness (`python -I autograder/verdict.py serve NOTEBOOK`) starts in the student's
   bubblewrap sandbox (autograder/sandbox.py) and runs the notebook's cells in order,
   except the graded test cells, each under the lab's cell time limit.
2. At each graded test cell it stops and tells the grader. The grader runs that cell's
   hidden check (`autograder.checks.<lab>.check_*`, the very function the test cell calls)
   in its own process with stand-ins for the student's functions: a call to a stand-in
   is sent to the harness, which calls the student's function and sends back its value.
   Values are encoded as plain data (numbers, strings, lists, tuples, dicts, numpy arrays
   and torch tensors of numeric dtypes, random generator states); anything else is
   refused on both sides, so no object of the student's ever exists in the grader.
   Exceptions come back as their builtin type and message (checks that expect a
   ValueError see one); each call has a time limit enforced by the grader.
3. The grader decides pass/fail from the check's own assertions; statistics, references
   and timing baselines (e.g. Lab 1's Python-loop sampler, Lab 2's `speclab` decoder)
   run in the grader, where the student cannot patch them; the student's side of a
   timing is the round trip measured by the grader.
A student's code can forge the values its own functions return (that is the same as
computing them), hide, crash or hang its harness (its remaining cells get 0), and nothing
else: the verdict, the baselines and the statistics are out of its reach.

Which cells are judged this way: a graded cell whose hidden tests consist of calls
`_checks.check_NAME(f, g, ...)` on `from autograder.checks import LAB as _checks`, with
f, g, ... names of the student's functions, and whose check sends only portable values.
`Unportable` marks the other cells; the pipeline grades them as before (nbgrader and the
in-sandbox re-check, lower score kept).
"""
from __future__ import annotations

import base64
import builtins
import dataclasses
import importlib
import json
import os
import re
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MAX_LINE = 1 << 30  # largest message either side accepts (Lab 1 sends two 320 MB arrays, base64, in one call)
CACHE_BYTES = 256 << 10  # arrays at least this large are sent once per session, then named
MAX_DEPTH = 32
DTYPE_KINDS = "biufc"  # numeric numpy dtypes only: no objects, no pickles


class Unportable(TypeError):
    """A value the grader does not send to (or accept from) the sandbox."""


class HarnessGone(BaseException):
    """The student's harness died, hung or broke the protocol (BaseException: checks cannot catch it)."""


# ----------------------------------------------------------------------------- plain values
def encode(x, refs: dict | None = None, depth: int = 0):
    """x as JSON-able data; refs: id(object) -> name of an object both sides can rebuild."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise Unportable("nested too deeply")
    if refs is not None and id(x) in refs and refs[id(x)][0] is x:
        return {"__ref__": refs[id(x)][1]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, np.generic):
        return {"__npscalar__": encode(np.asarray(x), refs, depth + 1)}
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in DTYPE_KINDS:
            raise Unportable(f"array of dtype {x.dtype}")
        if x.ndim >= 2 and x.nbytes >= CACHE_BYTES and len(x) > 1 and (x.strides[0] == 0 or _rows_alike(x)):
            # rows all alike (the checks' np.broadcast_to or np.tile of one (p, q) pair): one row and a count
            return {"__tile__": encode(x[0], None, depth + 1), "reps": len(x)}
        out = {"__nd__": x.dtype.str, "shape": list(x.shape)}
        small = _narrow_int(x)
        if small is not None:  # e.g. int64 tokens of a small vocabulary travel as int8, back to int64 on arrival
            out["as"], x = small.str, x.astype(small)
        out["b64"] = base64.b64encode(x.tobytes(order="C")).decode()
        return out
    if isinstance(x, np.random.Generator):
        return {"__rng__": x.bit_generator.state}
    if isinstance(x, (list, tuple)):
        items = [encode(v, refs, depth + 1) for v in x]
        return items if isinstance(x, list) else {"__tuple__": items}
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise Unportable("dict with non-string keys")
        return {"__dict__": {k: encode(v, refs, depth + 1) for k, v in x.items()}}
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(x, torch.Tensor):
            if x.dtype == torch.bfloat16 or x.is_sparse:
                raise Unportable(f"tensor of dtype {x.dtype}")
            return {"__torch__": str(x.dtype).replace("torch.", ""), "device": x.device.type,
                    "nd": encode(x.detach().cpu().numpy(), None, depth + 1)}
        if isinstance(x, torch.device):
            return {"__device__": str(x)}
        if isinstance(x, torch.Generator):
            return {"__tgen__": encode(x.get_state().numpy(), None, depth + 1), "device": x.device.type}
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and type(x).__module__.startswith("speclab."):
        return {"__dc__": f"{type(x).__module__}:{type(x).__qualname__}",
                "fields": {f.name: encode(getattr(x, f.name), refs, depth + 1) for f in dataclasses.fields(x)}}
    raise Unportable(f"a {type(x).__module__}.{type(x).__qualname__} cannot cross the sandbox")


def _rows_alike(x) -> bool:
    """Every row of x bit for bit the same as the first (so -0.0 and 0.0 differ, a NaN equals itself)."""
    import numpy as np

    b = np.ascontiguousarray(x).view(np.uint8).reshape(len(x), -1)
    return bool((b == b[0]).all())


def _narrow_int(x) -> "object | None":
    """The smallest integer dtype holding every value of a large integer array, when smaller than
    its own (the batch samplers' outputs are int64 tokens of a 4-token vocabulary: sent as int8,
    the pipe carries 8 times fewer bytes, which the grader's timing of the round trip would count)."""
    import numpy as np

    if x.dtype.kind not in "iu" or x.size < 1024 or x.dtype.itemsize == 1:
        return None
    lo, hi = int(x.min()), int(x.max())
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return np.dtype(t) if np.dtype(t).itemsize < x.dtype.itemsize else None
    return None


def decode(d, resolve: Callable[[str], object] | None = None, depth: int = 0):
    """The inverse of encode, validating as it goes (resolve: ref name -> object, or None to refuse)."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise Unportable("nested too deeply")
    if d is None or isinstance(d, (bool, int, float, str)):
        return d
    if isinstance(d, list):
        return [decode(v, resolve, depth + 1) for v in d]
    if not isinstance(d, dict) or len(d) == 0:
        raise Unportable(f"unexpected {type(d).__name__}")
    if "__nd__" in d:
        dtype = np.dtype(str(d["__nd__"]))
        sent = np.dtype(str(d["as"])) if "as" in d else dtype
        shape = tuple(int(s) for s in d["shape"])
        raw = base64.b64decode(str(d["b64"]), validate=True)
        if dtype.kind not in DTYPE_KINDS or any(s < 0 for s in shape) or \
                int(np.prod(shape, dtype=np.int64)) * sent.itemsize != len(raw):
            raise Unportable("malformed array")
        if sent != dtype and not (sent.kind == "i" and dtype.kind in "iu" and sent.itemsize < dtype.itemsize):
            raise Unportable("malformed array")
        arr = np.frombuffer(raw, dtype=sent).reshape(shape)
        return arr.astype(dtype) if sent != dtype else arr.copy()
    if "__tile__" in d:
        row = decode(d["__tile__"], None, depth + 1)
        reps = int(d["reps"])
        if not isinstance(row, np.ndarray) or reps < 0 or reps * row.nbytes > MAX_LINE:
            raise Unportable("malformed array")
        return np.tile(row, (reps,) + (1,) * row.ndim)
    if "__npscalar__" in d:
        return decode(d["__npscalar__"], resolve, depth + 1)[()]
    if "__tuple__" in d:
        return tuple(decode(v, resolve, depth + 1) for v in d["__tuple__"])
    if "__dict__" in d:
        return {str(k): decode(v, resolve, depth + 1) for k, v in dict(d["__dict__"]).items()}
    if "__rng__" in d:
        rng = np.random.default_rng()
        state = dict(d["__rng__"])
        if state.get("bit_generator") != "PCG64":
            rng = np.random.Generator(getattr(np.random, str(state.get("bit_generator")))())
        rng.bit_generator.state = state
        return rng
    if "__torch__" in d:
        import torch

        arr = decode(d["nd"], None, depth + 1)
        dtype = getattr(torch, str(d["__torch__"]))
        if not isinstance(dtype, torch.dtype):
            raise Unportable("not a torch dtype")
        return torch.from_numpy(arr).to(dtype)
    if "__device__" in d:
        import torch

        return torch.device(str(d["__device__"]))
    if "__tgen__" in d:
        import torch

        g = torch.Generator()
        g.set_state(torch.from_numpy(decode(d["__tgen__"], None, depth + 1)).to(torch.uint8))
        return g
    if "__dc__" in d:
        mod, _, name = str(d["__dc__"]).partition(":")
        if not mod.startswith("speclab."):
            raise Unportable("only the course's own dataclasses cross")
        cls = getattr(importlib.import_module(mod), name)
        if not dataclasses.is_dataclass(cls):
            raise Unportable("not a dataclass")
        return cls(**{k: decode(v, resolve, depth + 1) for k, v in dict(d["fields"]).items()})
    if "__ref__" in d and resolve is not None:
        return resolve(list(d["__ref__"]))
    raise Unportable(f"unexpected value {str(d)[:80]}")


def _rng_states(args) -> list:
    """New states of the random generators among args (so the grader's generators advance)."""
    import numpy as np

    out = []
    for a in args:
        if isinstance(a, np.random.Generator):
            out.append(a.bit_generator.state)
        elif "torch" in sys.modules and isinstance(a, sys.modules["torch"].Generator):
            out.append({"__tgen__": encode(a.get_state().numpy())})
        else:
            out.append(None)
    return out


def _global_states() -> tuple:
    """The process-wide random generators' states (numpy's legacy one, torch's CPU one if loaded),
    as bytes: compared before and after the student's calls."""
    import numpy as np

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    out = [keys.tobytes() + repr((kind, pos, has_gauss, gauss)).encode()]
    torch = sys.modules.get("torch")
    out.append(torch.get_rng_state().numpy().tobytes() if torch is not None else b"")
    return tuple(out)


def _moved(before: tuple) -> list[str]:
    """Which global generators the student's calls moved since `before` ("numpy", "torch")."""
    return [name for name, a, b in zip(("numpy", "torch"), before, _global_states()) if a != b and a]


def _move_globals(moved) -> None:
    """In the grader: move this process's global generators as the student's calls moved theirs,
    so a check comparing the global states before and after (inside `alone()`) sees what the
    student's process did."""
    import numpy as np

    names = set(moved or ()) if isinstance(moved, list) else set()
    if "numpy" in names:
        np.random.random()
    if "torch" in names:
        import torch

        torch.rand(1)


# ----------------------------------------------------------------------------- the harness (sandbox side)
class _CellTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _CellTimeout()


class _Shell:
    """Stand-in for get_ipython(): magics and shell escapes do nothing."""

    def __getattr__(self, name):
        return lambda *a, **k: None


# Objects the checks pass (models) that both sides rebuild from the course's own code: a
# reference [module, function, args, index] means module.function(*args)[index].
REF_SOURCES = {("autograder.checks.lab2", "shipped_pair"), ("speclab.toy", "toy_pair")}
_REGISTRY: dict[int, tuple[object, list]] = {}  # id -> (object, reference); the object is kept alive


def _register(obj, ref: list) -> None:
    _REGISTRY[id(obj)] = (obj, ref)


def _install_recorders(check_module: str) -> None:
    """In the grader: make the course's model factories note what they return (idempotent).
    Only once a check module that uses models runs (one that imports torch): a lab without
    models never pays for importing torch."""
    if "torch" not in vars(sys.modules.get(check_module, sys)):
        return
    for mod_name, fn_name in REF_SOURCES:
        try:
            mod = importlib.import_module(mod_name)
        except Exception:  # noqa: BLE001 - a course without that module
            continue
        fn = getattr(mod, fn_name)
        if getattr(fn, "_recorder", False):
            continue

        def recorder(*args, _fn=fn, _mod=mod_name, _name=fn_name):
            out = _fn(*args)
            if all(isinstance(a, (int, str)) for a in args):
                for i, obj in enumerate(out):
                    _register(obj, [_mod, _name, list(args), i])
            return out
        recorder._recorder = True
        setattr(mod, fn_name, recorder)


def serve(nb_path: str, cell_timeout: int) -> int:
    """Run the notebook's cells, stopping at each graded test cell to serve the grader's calls."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    log = os.open("harness-output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # the notebook's own "under the grader" switch
    write = os.write

    def send(msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[write(proto_out, data):]

    with open(nb_path, encoding="utf-8") as f:
        nb = json.load(f)
    from IPython.core.inputtransformer2 import TransformerManager

    transform = TransformerManager().transform_cell
    # the harness's own tools, snapshotted before any student code and put back at every graded
    # cell, so that patching builtins, numpy or this module cannot garble the student's own answers
    from autograder.replay import _restore, _snapshot

    text = "\n".join("".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "code")
    import numpy  # noqa: F401

    prefixes = ("numpy", "json", "base64", "__main__", "importlib") + (("torch",) if "torch" in text else ())
    if "torch" in prefixes:
        import torch  # noqa: F401
    snap = _snapshot(prefixes)
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": lambda: _Shell(), "display": print}
    cache: dict = {}

    def resolve(ref):
        key = json.dumps(ref)
        if key not in cache:
            mod, fn, args, idx = ref
            if (mod, fn) not in REF_SOURCES:
                raise Unportable("unknown reference")
            cache[key] = getattr(importlib.import_module(mod), fn)(*args)[idx]
        return cache[key]

    def graded(c) -> bool:
        meta = c.get("metadata", {}).get("nbgrader", {})
        return c.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")

    cells = list(nb.get("cells", []))
    last = max((i for i, c in enumerate(cells) if graded(c)), default=-1)
    for c in cells[: last + 1]:  # the cells after the last graded one cannot change a verdict: not run
        if c.get("cell_type") != "code":
            continue
        meta = c.get("metadata", {}).get("nbgrader", {})
        if graded(c):
            _restore(snap)
            send({"at": meta.get("grade_id")})
            while True:
                line = proto_in.readline(MAX_LINE)
                if not line:
                    return 0
                req = json.loads(line)
                if req.get("op") == "next":
                    break
                send(_serve_each(req, ns, resolve) if req.get("op") == "each" else _serve_call(req, ns, resolve))
            continue
        signal.signal(signal.SIGALRM, _alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, cell_timeout)
            exec(compile(transform("".join(c.get("source", ""))), "<cell>", "exec"), ns)  # noqa: S102
        except BaseException:  # noqa: BLE001 - a failing cell does not stop the notebook, as in nbgrader
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    send({"at": None})
    return 0


_ARG_CACHE: dict = {}


def _arg(a, resolve):
    """One argument of a call; the student's function always gets a fresh copy of a cached
    array (what it does to it cannot change the next call's input)."""
    if isinstance(a, dict) and "__cached__" in a:
        return _ARG_CACHE[str(a["__cached__"])].copy()
    if isinstance(a, dict) and "__cache_as__" in a:
        _ARG_CACHE[str(a["__cache_as__"])] = decode(a["value"])
        return _ARG_CACHE[str(a["__cache_as__"])].copy()
    return decode(a, resolve)


def _serve_call(req: dict, ns: dict, resolve) -> dict:
    try:
        fn = ns.get(str(req["fn"]))
        if not callable(fn):
            raise NameError(f"name {req['fn']!r} is not defined")
        args = [_arg(a, resolve) for a in req["args"]]
        kwargs = decode(req["kwargs"], resolve)
        signal.signal(signal.SIGALRM, _alarm)
        before = _global_states()
        signal.setitimer(signal.ITIMER_REAL, float(req["timeout"]))
        try:
            value = fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        names = sorted(kwargs)
        return {"id": req["id"], "value": encode(value), "rngs": _rng_states(args),
                "krngs": dict(zip(names, _rng_states([kwargs[k] for k in names]))), "moved": _moved(before)}
    except _CellTimeout:
        return {"id": req.get("id"), "error": ["TimeoutError", "no result within the time limit"]}
    except BaseException as err:  # noqa: BLE001 - the student's exception is the result
        return {"id": req.get("id"), "error": [type(err).__name__, str(err)[:2000]]}


def _serve_each(req: dict, ns: dict, resolve) -> dict:
    """Many calls of one function (autograder/checks/calls.py): the shared values are decoded once;
    an array among them is copied afresh for every call, anything else (a generator) is the same
    object throughout. One time limit for all the calls; the first exception stops them."""
    done: list = []
    shared: list = []
    before: tuple = ()
    try:
        fn = ns.get(str(req["fn"]))
        if not callable(fn):
            raise NameError(f"name {req['fn']!r} is not defined")
        shared = [_arg(a, resolve) for a in req["shared"]]  # each one the harness's own, new object

        from autograder.checks.calls import fresh

        uses = [0] * len(shared)
        for a in [*(a for args in req["calls"] for a in args), *dict(req.get("kwargs") or {}).values()]:
            if isinstance(a, dict) and "__shared__" in a:
                uses[int(a["__shared__"])] += 1

        def arg(a):
            if isinstance(a, dict) and "__shared__" in a:
                i = int(a["__shared__"])
                return shared[i] if uses[i] == 1 else fresh(shared[i])  # a value used once needs no copy
            return decode(a, resolve)

        calls = [[arg(a) for a in args] for args in req["calls"]]
        kwargs = dict(req.get("kwargs") or {})
        signal.signal(signal.SIGALRM, _alarm)
        before = _global_states()
        signal.setitimer(signal.ITIMER_REAL, float(req["timeout"]))
        try:
            for args in calls:
                done.append(fn(*args, **{str(k): arg(v) for k, v in kwargs.items()}))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        error = None
    except _CellTimeout:
        error = ["TimeoutError", "no result within the time limit"]
    except BaseException as err:  # noqa: BLE001 - the student's exception is the result
        error = [type(err).__name__, str(err)[:2000]]
    try:
        msg = {"id": req.get("id"), "values": [encode(v) for v in done], "rngs": _rng_states(shared),
               "moved": _moved(before) if before else []}
    except Unportable as err:
        return {"id": req.get("id"), "error": ["TypeError", str(err)]}
    if error is not None:
        msg["error"] = error
    return msg


# ----------------------------------------------------------------------------- the grader's side
class Harness:
    """The grader's end of a harness running in a sandbox (a started sandbox.Session)."""

    def __init__(self, session, refs: dict, deadline: float = float("inf")):
        self.session, self.refs, self.next_id, self.deadline = session, refs, 0, deadline
        self.buf = b""
        self.sent: dict[int, tuple[object, str]] = {}  # large arrays the harness already holds

    def _encode_args(self, args) -> list:
        """Large arrays travel once per session (a check's timed calls repeat the same inputs:
        re-sending them would time the pipe, not the student's function)."""
        import numpy as np

        out = []
        for a in args:
            if isinstance(a, np.ndarray) and a.nbytes >= CACHE_BYTES:
                hit = self.sent.get(id(a))
                if hit is not None and hit[0] is a:
                    out.append({"__cached__": hit[1]})
                    continue
                value = encode(a)
                if "__tile__" in value:  # one row and a count: nothing to save by naming it
                    out.append(value)
                    continue
                key = str(len(self.sent))
                self.sent[id(a)] = (a, key)
                out.append({"__cache_as__": key, "value": value})
            else:
                out.append(encode(a, self.refs))
        return out

    def _read(self, deadline: float) -> dict:
        fd = self.session.stdout_fd
        deadline = min(deadline, self.deadline)
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessGone("no answer within the time limit")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise HarnessGone("the notebook's process ended")
            self.buf += chunk
            if len(self.buf) > MAX_LINE:
                raise HarnessGone("an answer larger than the limit")
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            raise HarnessGone("a malformed answer") from None
        if not isinstance(msg, dict):
            raise HarnessGone("a malformed answer")
        return msg

    def _send(self, msg: dict) -> None:
        try:
            self.session.write((json.dumps(msg) + "\n").encode(), max(1.0, min(60.0, self.deadline - time.monotonic())))
        except OSError:
            raise HarnessGone("the notebook's process ended") from None

    def wait_at(self, timeout_s: float) -> str | None:
        """The grade id of the next graded cell the notebook reached (None: the end)."""
        msg = self._read(time.monotonic() + timeout_s)
        if "at" not in msg:
            raise HarnessGone("an answer out of turn")
        return msg["at"]

    def next(self) -> None:
        self._send({"op": "next"})

    def _exchange(self, req: dict, timeout_s: float) -> dict:
        from autograder.checks.alone import SECTIONS

        self.next_id += 1
        req["id"] = self.next_id
        with SECTIONS.released():  # the student's code runs now, not the grader's: other checks may go on
            self._send(req)
            msg = self._read(time.monotonic() + timeout_s + 10)
        if msg.get("id") != self.next_id:
            raise HarnessGone("an answer out of turn")
        return msg

    @staticmethod
    def _raise(error) -> None:
        etype, text = (list(error) + ["", ""])[:2]
        cls = getattr(builtins, str(etype), None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = RuntimeError
            text = f"{etype}: {text}"
        raise cls(str(text)[:2000])

    def call_each(self, name: str, calls: list, kwargs: dict, timeout_s: float) -> list:
        """[student's name(*args, **kwargs) for args in calls] in one round trip
        (autograder/checks/calls.py); every argument that is not a plain number or string is
        sent once per batch (the harness copies arrays and tensors afresh for each call)."""
        shared, index = [], {}

        def enc(a):
            if a is None or isinstance(a, (bool, int, float, str)):
                return a
            if id(a) not in index:
                index[id(a)] = len(shared)
                shared.append(a)
            return {"__shared__": index[id(a)]}

        encoded = [[enc(a) for a in args] for args in calls]
        kw = {str(k): enc(v) for k, v in kwargs.items()}
        msg = self._exchange({"op": "each", "fn": name, "shared": self._encode_args(shared), "calls": encoded,
                              "kwargs": kw, "timeout": timeout_s}, timeout_s)
        try:
            values = [decode(v) for v in list(msg.get("values") or [])]
            states = list(msg.get("rngs") or [])
            for a, st in zip(shared, states):
                if st is not None:
                    _set_rng(a, st)
            _move_globals(msg.get("moved"))
        except (Unportable, KeyError, TypeError, ValueError) as err:
            raise AssertionError(f"{name} returned something that is not a plain value ({err})") from None
        if "error" in msg:
            self._raise(msg["error"])
        if len(values) != len(calls):
            raise HarnessGone("an answer of the wrong length")
        return values

    def call(self, name: str, args: tuple, kwargs: dict, timeout_s: float):
        msg = self._exchange({"fn": name, "args": self._encode_args(args), "kwargs": encode(kwargs, self.refs),
                              "timeout": timeout_s}, timeout_s)
        if "error" in msg:
            self._raise(msg["error"])
        try:
            value = decode(msg["value"])
            for a, st in zip(args, msg.get("rngs") or []):  # the grader's generators advance as the student's did
                if st is not None:
                    _set_rng(a, st)
            for k, st in dict(msg.get("krngs") or {}).items():
                if st is not None and k in kwargs:
                    _set_rng(kwargs[k], st)
            _move_globals(msg.get("moved"))
        except (Unportable, KeyError, TypeError, ValueError) as err:
            raise AssertionError(f"{name} returned something that is not a plain value ({err})") from None
        return value


def _set_rng(a, st) -> None:
    import numpy as np

    if isinstance(a, np.random.Generator):
        if not isinstance(st, dict) or st.get("bit_generator") != a.bit_generator.state["bit_generator"]:
            raise ValueError("random generator state")
        a.bit_generator.state = st
    else:
        a.set_state(decode(st).get_state())


@dataclass(frozen=True)
class CellCheck:
    """A graded cell judged in the grader: check_NAME(student functions...) calls of one checks module."""

    grade_id: str
    module: str  # e.g. autograder.checks.lab1
    calls: tuple[tuple[str, tuple[str, ...]], ...]  # (check function, student function names)


_CALL = re.compile(r"^(\w+)\.(check_\w+)\(\s*([\w\s,]*?)\s*\)\s*$")
_IMPORT = re.compile(r"^from autograder\.checks import (\w+) as (\w+)\s*$")


def cell_checks(sources: dict[str, str]) -> dict[str, CellCheck]:
    """grade id -> CellCheck for the graded cells whose hidden tests are only check calls."""
    out = {}
    for gid, src in sources.items():
        m = re.search(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", src, re.S)
        if not m:
            continue
        lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
        alias, module, calls = None, None, []
        for ln in lines:
            if (im := _IMPORT.match(ln)) and module is None:
                module, alias = f"autograder.checks.{im.group(1)}", im.group(2)
            elif (cm := _CALL.match(ln)) and cm.group(1) == alias:
                names = tuple(a.strip() for a in cm.group(3).split(",") if a.strip())
                calls.append((cm.group(2), names))
            else:
                calls = []
                break
        if module and calls:
            out[gid] = CellCheck(gid, module, tuple(calls))
    return out


def graded_sources(db: Path, lab: str) -> dict[str, str]:
    """grade id -> source of each graded test cell, from the template gradebook (hidden tests included)."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for nb in gb.find_assignment(lab).notebooks:
            for g in nb.grade_cells:
                try:
                    out[g.name] = gb.find_source_cell(g.name, nb.name, lab).source
                except Exception:  # noqa: BLE001
                    continue
    return out


_RECORDERS_LOCK = threading.Lock()


class _StandIn:
    """What a check gets for a student's function: calls go to the harness in the sandbox."""

    def __init__(self, harness: Harness, name: str, timeout_s: float):
        self.harness, self.__name__, self.timeout_s = harness, name, timeout_s

    def __call__(self, *args, **kwargs):
        return self.harness.call(self.__name__, args, kwargs, self.timeout_s)

    def speclab_call_each(self, calls: list, kwargs: dict) -> list:  # autograder.checks.calls.BATCH_METHOD
        return self.harness.call_each(self.__name__, calls, kwargs, self.timeout_s)


def run_check(harness: Harness, spec: CellCheck, call_timeout_s: float) -> tuple[bool, str]:
    """Run one cell's checks in this process against the student's functions in the sandbox.
    (passed, error); raises Unportable when a check passes something that cannot cross, and
    HarnessGone when the student's process is gone."""
    from autograder.checks.alone import SECTIONS

    module = importlib.import_module(spec.module)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        # one thread per check: other students' checks, nbgrader and the harnesses share the cores
        torch.set_num_threads(1)
    with _RECORDERS_LOCK:
        _install_recorders(spec.module)
    harness.refs = _REGISTRY

    def stand_in(name):
        return _StandIn(harness, name, call_timeout_s)

    try:
        # students' checks overlap in the grader; timed sections and those reading process-wide
        # state run alone (autograder/checks/alone.py)
        with SECTIONS.shared():
            for check, names in spec.calls:
                getattr(module, check)(*[stand_in(n) for n in names])
    except (Unportable, HarnessGone):
        raise
    except Exception as err:  # noqa: BLE001 - the check's failure is the verdict
        return False, f"{type(err).__name__}: {str(err)[:300]}"
    return True, ""


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        timeout = int(argv[argv.index("--cell-timeout") + 1]) if "--cell-timeout" in argv else 60
        return serve(argv[1], timeout)
    print("usage: python -I autograder/verdict.py serve NOTEBOOK [--cell-timeout S]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
    root = os.environ.get("SPECLAB_CODE_ROOT")
    if root:
        sys.path.insert(0, root)
    sys.exit(main(sys.argv[1:]))
