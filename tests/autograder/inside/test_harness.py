"""The grader's own verdict: what crosses the sandbox (autograder/inside/wire.py), and the harness
(autograder/inside/harness.py) driven from the grader's end (autograder/pipeline/judge.py).

Plain values round-trip exactly; objects (a student's class, a function, an object array)
are refused on both sides; random generators advance in the grader as they did in the
sandbox; the harness, run in a real sandbox, answers calls, reports exceptions by their
builtin type and survives nothing it should not.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder.checks.calls import call_each
from autograder import sandbox
from autograder.inside import launch, wire
from autograder.pipeline import judge


@pytest.mark.parametrize("value", [
    None, True, 3, -2.5, "text", [1, [2, 3]], (1, (2.0, "x")), {"a": (1, 2)},
    np.arange(6, dtype=np.int32).reshape(2, 3), np.array([0.1, np.nan, np.inf]), np.float32(1.5), np.bool_(True),
    torch.arange(4, dtype=torch.int64), torch.tensor([[0.5, 1.5]]),
])
def test_plain_values_round_trip(value):
    back = wire.decode(json.loads(json.dumps(wire.encode(value))))
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value, equal_nan=True)
    elif isinstance(value, torch.Tensor):
        assert back.dtype == value.dtype and torch.equal(back, value)
    elif isinstance(value, np.generic):
        assert type(back) is type(value) and back == value
    else:
        assert back == value and type(back) is type(value)


class Sneaky:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [Sneaky(), lambda: 1, np.array([Sneaky()], dtype=object), {1: 2}, "deep"])
def test_objects_are_refused(value):
    if isinstance(value, str):
        deep: list = []
        for _ in range(wire.MAX_DEPTH + 2):
            deep = [deep]
        value = deep
    with pytest.raises(wire.Unportable):
        wire.encode(value)


@pytest.mark.parametrize("forged", [
    {"__nd__": "|O", "shape": [1], "b64": ""},  # object dtype: would unpickle
    {"__nd__": "<f8", "shape": [3], "b64": "AAAA"},  # wrong size
    {"__dc__": "os:system", "fields": {}},  # not a course dataclass
    {"__ref__": ["os", "system", ["true"], 0]},  # references are refused in answers
    {"whatever": 1},
])
def test_forged_answers_are_refused(forged):
    with pytest.raises((wire.Unportable, ValueError, TypeError)):
        wire.decode(forged)


def test_cell_checks_parse_only_pure_check_calls():
    src = {
        "a": "x = 1\n### BEGIN HIDDEN TESTS\nfrom autograder.checks import lab1 as _checks\n_checks.check_a(f, g)\n"
             "### END HIDDEN TESTS",
        "b": "### BEGIN HIDDEN TESTS\nfrom autograder.checks import lab1 as _checks\n_checks.check_b(f)\n"
             "assert True\n### END HIDDEN TESTS",  # anything else in the hidden part: not judged here
        "c": "assert f(1) == 2",
    }
    specs = judge.cell_checks(src)
    assert set(specs) == {"a"}
    assert specs["a"].module == "autograder.checks.lab1" and specs["a"].calls == (("check_a", ("f", "g")),)


NOTEBOOK_CELLS = [
    ("code", {}, "import numpy as np\n"),
    ("code", {}, "def square(x):\n    return np.asarray(x) ** 2\n\n\ndef picky(x):\n    raise ValueError('no')\n\n\n"
                 "def slow(x):\n    import time\n    time.sleep(100)\n\n\ndef draw(rng):\n    return rng.integers(10, size=3)\n\n\n"
                 "def leave():\n    import os\n    os._exit(0)\n\n\n"
                 "def draw_torch(generator=None):\n    import torch\n    return torch.rand(5, generator=generator)\n\n\n"
                 "def spoil(p, rng):\n    x = int(rng.integers(len(p)))\n    if p[0] < 0:\n        raise ValueError('saw a spoiled p')\n"
                 "    p[0] = -1.0\n    if len(p) == 3:\n        raise KeyError('three')\n    return x\n\n\n"
                 "def tokens(n):\n    return np.arange(n, dtype=np.int64) % 7 - 3\n\n\n"
                 "def sloppy(rng):\n    np.random.random()\n    return int(rng.integers(10))\n\n\n"
                 "def sloppy_torch(rng):\n    import torch\n    torch.rand(1)\n    return int(rng.integers(10))\n"),
    ("code", {"nbgrader": {"grade": True, "grade_id": "t1", "solution": False}}, "pass"),
    ("code", {}, "while True:\n    pass\n"),  # interrupted at the cell limit; the notebook goes on
    ("code", {"nbgrader": {"grade": True, "grade_id": "t2", "solution": False}}, "pass"),
]


def _notebook(path: Path, cells=NOTEBOOK_CELLS, metadata: dict | None = None) -> None:
    """A notebook of (cell type, metadata, source) cells at path."""
    cells = [{"cell_type": t, "metadata": m, "source": s, "outputs": [], "execution_count": None} for t, m, s in cells]
    path.write_text(json.dumps({"cells": cells, "metadata": metadata or {}, "nbformat": 4, "nbformat_minor": 5}))


GRADED_T1 = ("code", {"nbgrader": {"grade": True, "grade_id": "t1", "solution": False}}, "pass")


def _through_t1(s: sandbox.Session) -> None:
    """Drive a harness serving a notebook whose one graded cell is t1 to its end, then close it."""
    h = judge.Harness(s, {}, 60)
    try:
        assert h.wait_at(30) == "t1"
        h.next()
        assert h.wait_at(30) is None
    finally:
        s.close()


REPO = Path(__file__).resolve().parents[3]


def _session(scratch: Path, uid: int, tmp_path: Path, cell_timeout: int, *extra: str) -> sandbox.Session:
    """The harness serving scratch/nb.ipynb in a student's sandbox, started as the pipeline starts it."""
    box = sandbox.StudentBox(REPO, tuple(sandbox.course_mounts(REPO, REPO)), sandbox.Limits(memory_mb=2048), uid,
                             tmp_path / "logs")
    cmd = launch(REPO, "autograder.inside.harness", "serve", scratch / "nb.ipynb", "--cell-timeout", cell_timeout,
                 *extra)
    env = {**box.env(scratch), "NBGRADER_EXECUTION": "autograde"}  # as if the grader's own environment had it
    return box.session(cmd, scratch, scratch, env, "verdict.log")


@pytest.mark.parametrize("switch", [False, True])
def test_the_verdict_sets_nbgrader_execution_only_for_a_lab_that_reads_it(tmp_path, switch):
    """Issue 31: Lab 1's verdict runs without NBGRADER_EXECUTION (a notebook exact only when it is set gains
    nothing where the grade is decided); a lab whose notebook shrinks its sweeps under it (Lab 2) gets it."""
    assert sandbox.capabilities().ok, sandbox.capabilities().missing
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _notebook(scratch / "nb.ipynb", [
        ("code", {}, "import os\nopen('seen', 'w').write(os.environ.get('NBGRADER_EXECUTION', 'unset'))\n"), GRADED_T1])
    uid = sandbox.student_uid(7)
    sandbox.give_to(scratch, uid)
    _through_t1(_session(scratch, uid, tmp_path, 5, *(["--grading-switch"] if switch else [])))
    assert (scratch / "seen").read_text() == ("autograde" if switch else "unset")
    from autograder.checks import lab1, lab2

    assert getattr(lab2, "NOTEBOOK_READS_GRADING", False) and not getattr(lab1, "NOTEBOOK_READS_GRADING", False)


def test_harness_in_a_real_sandbox(tmp_path):
    assert sandbox.capabilities().ok, sandbox.capabilities().missing
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _notebook(scratch / "nb.ipynb")
    uid = sandbox.student_uid(5)
    sandbox.give_to(scratch, uid)
    s = _session(scratch, uid, tmp_path, 2)
    h = judge.Harness(s, {}, 120)
    try:
        assert h.wait_at(60) == "t1"
        assert np.array_equal(h.call("square", (np.arange(3),), {}, 10), [0, 1, 4])
        big = np.arange(100_000, dtype=np.float64)  # large: sent once, then named; a fresh copy each call
        assert np.array_equal(h.call("square", (big,), {}, 10), big ** 2)
        assert np.array_equal(h.call("square", (big,), {}, 10), big ** 2) and len(h.sent) == 1
        with pytest.raises(ValueError, match="no"):
            h.call("picky", (1,), {}, 10)
        with pytest.raises(NameError):
            h.call("missing", (), {}, 10)
        with pytest.raises(TimeoutError):
            h.call("slow", (1,), {}, 1)
        rng, twin = np.random.default_rng(7), np.random.default_rng(7)
        assert np.array_equal(h.call("draw", (rng,), {}, 10), twin.integers(10, size=3))
        assert rng.bit_generator.state == twin.bit_generator.state  # the grader's generator advanced too
        gen, gen_twin = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        h.call("draw_torch", (), {"generator": gen}, 10)
        torch.rand(5, generator=gen_twin)
        assert torch.equal(gen.get_state(), gen_twin.get_state())  # keyword generators too
        # many calls in one round trip (autograder/checks/calls.py): the loop's results and generator
        # state, a fresh copy of the array for each call (spoil() would raise on a reused one)
        p = np.ones(100) / 100
        rng, twin = np.random.default_rng(11), np.random.default_rng(11)
        stand_in = judge._StandIn(h, "spoil", 10)
        got = call_each(stand_in, [(p, rng)] * 50)
        want = [int(twin.integers(100)) for _ in range(50)]
        assert got == want and rng.bit_generator.state == twin.bit_generator.state and p[0] == 0.01
        with pytest.raises(KeyError):  # the first exception stops the calls and comes back as itself
            call_each(stand_in, [(p, rng)] * 5 + [(np.ones(3) / 3, rng)] + [(p, rng)] * 5)
        for n in (100, 100, 100, 100, 100, 3):
            twin.integers(n)
        assert rng.bit_generator.state == twin.bit_generator.state  # advanced by the calls made, up to the error
        assert len(call_each(judge._StandIn(h, "square", 10), [])) == 0
        with pytest.raises(TimeoutError):  # one time limit for all the calls
            call_each(judge._StandIn(h, "slow", 1), [(1,)] * 3)
        for n in (5, 5000):  # large integer outputs travel narrowed and arrive as int64
            out = h.call("tokens", (n,), {}, 10)
            assert out.dtype == np.int64 and np.array_equal(out, np.arange(n) % 7 - 3)
        # the student's process moving its global generators moves the grader's (what a contract
        # check compares inside alone()); calls that use only their own generator move nothing
        def np_state():
            state = np.random.get_state()
            return state[1].tobytes(), state[2:]

        np_before, torch_before = np_state(), torch.get_rng_state()
        h.call("draw", (np.random.default_rng(1),), {}, 10)
        call_each(judge._StandIn(h, "draw", 10), [(np.random.default_rng(1),)] * 3)
        assert np_before == np_state() and torch.equal(torch_before, torch.get_rng_state())
        for name, single in (("sloppy", True), ("sloppy", False), ("sloppy_torch", True), ("sloppy_torch", False)):
            np_before, torch_before = np_state(), torch.get_rng_state()
            if single:
                h.call(name, (np.random.default_rng(1),), {}, 10)
            else:
                call_each(judge._StandIn(h, name, 10), [(np.random.default_rng(1),)] * 3)
            moved_np = np_before != np_state()
            moved_torch = not torch.equal(torch_before, torch.get_rng_state())
            assert (moved_np, moved_torch) == ((True, False) if name == "sloppy" else (False, True)), (name, single)
        h.next()
        assert h.wait_at(60) == "t2"  # the infinite loop between was interrupted
        with pytest.raises(judge.HarnessGone):
            h.call("leave", (), {}, 10)
    finally:
        s.close()
    if sandbox.capabilities().root:
        assert sandbox.processes_of(uid) == []


def test_call_each_in_process_is_the_plain_loop():
    """Outside the verdict call_each is the loop, each call with fresh copies of the arrays."""
    def spoil(p, rng):
        assert p[0] == 0.5, "a previous call's change reached this call"
        p[0] = -1.0
        return int(rng.integers(10))

    p, rng, twin = np.array([0.5, 0.5]), np.random.default_rng(4), np.random.default_rng(4)
    assert call_each(spoil, [(p, rng)] * 20) == [int(twin.integers(10)) for _ in range(20)]
    assert p[0] == 0.5 and rng.bit_generator.state == twin.bit_generator.state


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.uint64])
def test_narrowed_integers_round_trip(dtype):
    x = (np.arange(3000) % 200).astype(dtype)
    enc = wire.encode(x)
    assert enc.get("as") == ("<i2" if x.dtype.itemsize > 2 else None)  # 0..199 does not fit int8
    back = wire.decode(json.loads(json.dumps(enc)))
    assert back.dtype == x.dtype and np.array_equal(back, x)
    bad = dict(wire.encode(x.astype(np.int64)), **{"as": "<f8"})  # a float "narrowing" is refused, not reinterpreted
    with pytest.raises(wire.Unportable):
        wire.decode(bad)


def test_tiled_arrays_travel_as_one_row():
    x = np.tile(np.array([0.1, 0.2, 0.7]), (50_000, 1))
    enc = wire.encode(x)
    assert "__tile__" in enc and len(json.dumps(enc)) < 1000
    back = wire.decode(json.loads(json.dumps(enc)))
    assert back.dtype == x.dtype and np.array_equal(back, x)
    y = x.copy()
    y[-1, 0] = 0.2  # one row differs: sent whole
    assert "__tile__" not in wire.encode(y) and np.array_equal(wire.decode(wire.encode(y)), y)
    z = x.copy()
    z[7, 1] = -0.0 if z[0, 1] == 0 else z[0, 1]
    z[:, 0] = 0.0
    z[3, 0] = -0.0  # equal as numbers, not as bits: sent whole, the sign kept
    back = wire.decode(json.loads(json.dumps(wire.encode(z))))
    assert np.signbit(back[3, 0]) and not np.signbit(back[2, 0])


def test_harness_stops_after_the_last_graded_cell(tmp_path):
    """Cells after the last graded one cannot change a verdict: the harness does not run them."""
    assert sandbox.capabilities().ok, sandbox.capabilities().missing
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _notebook(scratch / "nb.ipynb", [("code", {}, "open('before', 'w').write('x')\n"), GRADED_T1,
                                     ("code", {}, "open('after', 'w').write('x')\n")])
    uid = sandbox.student_uid(6)
    sandbox.give_to(scratch, uid)
    _through_t1(_session(scratch, uid, tmp_path, 5))
    assert (scratch / "before").exists() and not (scratch / "after").exists()


class BadInput(ValueError):
    """A student's own error class."""


class Odd(Exception):
    pass


@pytest.mark.parametrize(("err", "want"), [
    (BadInput("p sums to 0.9"), ["ValueError", "BadInput: p sums to 0.9"]),  # crosses as its built-in base
    (ValueError("plain"), ["ValueError", "plain"]),
    (KeyError("k"), ["KeyError", "'k'"]),
    (Odd("x"), ["Exception", "Odd: x"]),  # no built-in base but Exception itself
])
def test_an_exception_crosses_as_its_nearest_built_in_class(err, want):
    assert wire.error_of(err) == want
    with pytest.raises(getattr(__import__("builtins"), want[0])):
        judge.Harness._raise(want)  # the grader raises that class, so a check expecting ValueError sees one


def test_any_sequence_crosses_as_a_list_and_bytes_do_not():
    import collections

    assert wire.decode(wire.encode(collections.deque([2, 0, 1]))) == [2, 0, 1]
    assert wire.decode(wire.encode(range(3))) == [0, 1, 2]
    with pytest.raises(wire.Unportable):
        wire.encode(b"\x00\x01")


OBSERVE = """import json, os, sys
from autograder.checks import hidden
seen = {"env": sorted(os.environ), "argv0": os.path.basename(sys.argv[0]), "ipykernel": "ipykernel" in sys.modules,
        "shell": type(get_ipython()).__name__, "NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION"),
        "key": hidden.active(), "files": sorted(f for f in os.listdir(".") if not f.startswith("."))}
json.dump(seen, open("seen.json", "w"))
"""
# What tells the verdict's harness from a Jupyter kernel run in the same sandbox (as nbgrader's run, or
# `jupyter nbconvert --execute`, runs one): autograder/THREATS.md lists these ("Telling the grader apart").
KERNEL_TELLS = {"argv0", "ipykernel", "shell"}
KERNEL_ENV = {"CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "GIT_PAGER", "JPY_PARENT_PID", "PAGER",
              "PYDEVD_USE_FRAME_EVAL", "TERM"}  # variables ipykernel sets for itself
HARNESS_FILES = {"harness-output.log"}  # where the verdict's harness keeps what the notebook prints


def test_what_a_notebook_observes_under_the_verdict_and_in_a_kernel(tmp_path):
    """Issue 31: the same Lab 1 notebook cell records what it can observe, once under the verdict's harness and
    once executed by `jupyter nbconvert --execute` in the same sandbox and environment. Neither holds a key
    or NBGRADER_EXECUTION; the differences are the documented KERNEL_TELLS (and environment variables a
    kernel sets for itself), nothing that carries a hidden input."""
    assert sandbox.capabilities().ok, sandbox.capabilities().missing
    kernelspec = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    seen = {}
    for how in ("verdict", "kernel"):
        scratch = tmp_path / how
        for sub in ("home", "runtime", "ipython"):
            (scratch / sub).mkdir(parents=True)
        _notebook(scratch / "nb.ipynb", [("code", {}, OBSERVE), GRADED_T1], kernelspec)
        uid = sandbox.student_uid(8)
        sandbox.give_to(scratch, uid)
        box = sandbox.StudentBox(REPO, tuple(sandbox.course_mounts(REPO, REPO)), sandbox.Limits(memory_mb=2048), uid,
                                 tmp_path / "logs")
        if how == "verdict":
            cmd = launch(REPO, "autograder.inside.harness", "serve", scratch / "nb.ipynb", "--cell-timeout", 30)
            _through_t1(box.session(cmd, scratch, scratch, box.env(scratch), "verdict.log"))
        else:
            cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--output",
                   "ran.ipynb", str(scratch / "nb.ipynb")]
            box.run(cmd, scratch, scratch, box.env(scratch), 120, "kernel.log")
        seen[how] = json.loads((scratch / "seen.json").read_text())
    verdict, kernel = seen["verdict"], seen["kernel"]
    print(json.dumps(seen, indent=1))
    assert verdict["NBGRADER_EXECUTION"] is None and kernel["NBGRADER_EXECUTION"] is None
    assert verdict["key"] is False and kernel["key"] is False  # the key never enters a sandbox
    differ = {k for k in verdict if k not in ("env", "files") and verdict[k] != kernel[k]}
    assert differ == KERNEL_TELLS, differ
    assert verdict["ipykernel"] is False and kernel["ipykernel"] is True
    # environment: the verdict has no variable a kernel run lacks; the kernel has only those it sets for itself
    assert set(verdict["env"]) <= set(kernel["env"]), set(verdict["env"]) - set(kernel["env"])
    assert set(kernel["env"]) - set(verdict["env"]) <= KERNEL_ENV, set(kernel["env"]) - set(verdict["env"])
    assert set(verdict["files"]) - set(kernel["files"]) <= HARNESS_FILES
