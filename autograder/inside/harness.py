"""The verdict's harness: runs a student's notebook inside the sandbox and serves the grader's calls.

Started by the grader (autograder/pipeline/judge.py) in the student's bubblewrap sandbox as
`python -I -c LAUNCH ROOT autograder.inside.harness serve NOTEBOOK --cell-timeout S` (see
`autograder.inside.launch`). It runs the notebook's cells in order, except the graded test
cells, each under the lab's cell time limit. At each graded test cell it stops and tells the
grader (`{"at": grade_id}` on stdout), then answers the grader's requests: call one of the
student's functions (`_serve_call`) or call it many times with shared inputs
(`_serve_each`), until the grader says `next`. Values cross as plain data (wire.py). Before
every graded cell the harness's own tools are put back as they were before any student code
ran (protect.py), so patching builtins, numpy or this module cannot garble the student's own
answers. A student's code can forge what its own functions return (that is the same as
computing it), hide, crash or hang this harness (its remaining cells get 0), and nothing else.
"""
from __future__ import annotations

import builtins
import json
import os
import sys

from autograder.checks.calls import fresh
from autograder.inside.protect import CellTimeout, Shell, cell_timer, restore, snapshot
from autograder.checks.models import UnknownReference, rebuild
from autograder.inside.wire import (MAX_LINE, Unportable, decode, encode, error_of, global_states,
                                    moved_since, rng_states)


def serve(nb_path: str, cell_timeout: int, grading_switch: bool = False) -> int:
    """Run the notebook's cells, stopping at each graded test cell to serve the grader's calls.
    grading_switch: set NBGRADER_EXECUTION, as nbgrader does, for a lab whose notebook reads it to shrink its
    own sweeps (the lab's checks module declares NOTEBOOK_READS_GRADING = True). Otherwise the notebook runs
    as in a student's own session as far as that variable goes, so a notebook that behaves well only when it
    is set earns nothing from it here, where the verdict is decided."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    log = os.open("harness-output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.setdefault("MPLBACKEND", "Agg")
    if grading_switch:
        os.environ["NBGRADER_EXECUTION"] = "autograde"  # the notebook's own "under the grader" switch
    else:
        os.environ.pop("NBGRADER_EXECUTION", None)
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
    text = "\n".join("".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "code")
    import numpy  # noqa: F401

    # "autograder": this harness, its wire format and its protection are modules of the package
    prefixes = ("numpy", "json", "base64", "autograder", "importlib") + (("torch",) if "torch" in text else ())
    if "torch" in prefixes:
        import torch  # noqa: F401
    snap = snapshot(prefixes)
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": lambda: Shell(), "display": print}
    cache: dict = {}

    def resolve(ref):
        key = json.dumps(ref)
        if key not in cache:
            try:
                cache[key] = rebuild(ref)  # a model the grader's check hands over (autograder/checks/models.py)
            except (UnknownReference, ValueError, TypeError) as err:
                raise Unportable(str(err)) from None
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
            restore(snap)
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
        try:
            with cell_timer(cell_timeout):
                exec(compile(transform("".join(c.get("source", ""))), "<cell>", "exec"), ns)  # noqa: S102
        except BaseException:  # noqa: BLE001 - a failing cell does not stop the notebook, as in nbgrader
            pass
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
        before = global_states()
        with cell_timer(float(req["timeout"])):
            value = fn(*args, **kwargs)
        names = sorted(kwargs)
        return {"id": req["id"], "value": encode(value), "rngs": rng_states(args),
                "krngs": dict(zip(names, rng_states([kwargs[k] for k in names]))), "moved": moved_since(before)}
    except CellTimeout:
        return {"id": req.get("id"), "error": ["TimeoutError", "no result within the time limit"]}
    except BaseException as err:  # noqa: BLE001 - the student's exception is the result
        return {"id": req.get("id"), "error": error_of(err)}


def _serve_each(req: dict, ns: dict, resolve) -> dict:
    """Many calls of one function (autograder/checks/calls.py): the shared values are decoded once;
    an array among them is copied afresh for every call, just before that call (so only one call's
    copies are held at a time), anything else (a generator) is the same object throughout. One time
    limit for all the calls, copies included; the first exception stops them."""
    done: list = []
    shared: list = []
    before: tuple = ()
    try:
        fn = ns.get(str(req["fn"]))
        if not callable(fn):
            raise NameError(f"name {req['fn']!r} is not defined")
        shared = [_arg(a, resolve) for a in req["shared"]]  # each one the harness's own, new object
        uses = [0] * len(shared)
        for a in [*(a for args in req["calls"] for a in args), *dict(req.get("kwargs") or {}).values()]:
            if isinstance(a, dict) and "__shared__" in a:
                uses[int(a["__shared__"])] += 1

        def arg(a):
            if isinstance(a, dict) and "__shared__" in a:
                i = int(a["__shared__"])
                return shared[i] if uses[i] == 1 else fresh(shared[i])  # a value used once needs no copy
            return decode(a, resolve)

        kwargs = dict(req.get("kwargs") or {})
        before = global_states()
        with cell_timer(float(req["timeout"])):
            for args in req["calls"]:
                done.append(fn(*[arg(a) for a in args], **{str(k): arg(v) for k, v in kwargs.items()}))
        error = None
    except CellTimeout:
        error = ["TimeoutError", "no result within the time limit"]
    except BaseException as err:  # noqa: BLE001 - the student's exception is the result
        error = error_of(err)
    try:
        msg = {"id": req.get("id"), "values": [encode(v) for v in done], "rngs": rng_states(shared),
               "moved": moved_since(before) if before else []}
    except Unportable as err:
        return {"id": req.get("id"), "error": ["TypeError", str(err)]}
    if error is not None:
        msg["error"] = error
    return msg


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        timeout = int(argv[argv.index("--cell-timeout") + 1]) if "--cell-timeout" in argv else 60
        return serve(argv[1], timeout, "--grading-switch" in argv)
    print("usage: harness serve NOTEBOOK [--cell-timeout S] [--grading-switch] (started by autograder.inside.launch)",
          file=sys.stderr)
    return 2
