"""False failures and false passes of Lab 2's speed-up check on a loaded machine.

    python -m autograder.audit.timing_load [--runs 20] [--wrong 5] [--busy 2] [--report]

`make audit timing_load` runs it with --report (autograder/audit/reports.py gives its settings) and writes
autograder/audit/reports/timing_load.json: every grading, the rates with their 95 % upper bounds, the machine,
its load and the wall time. Its verdicts: no slow decoder awarded (a false pass), no reference's points taken on
a clear verdict (a false failure), no grading crashed.

Times the hidden speed-up check (autograder.checks.lab2.check_speedup) as the grading pipeline now
times it: one grading at a time (the class run judges timed cells one student at a time, after
every untimed check), each in a fresh interpreter, in a control group that comes first for the CPU
(autograder/sandbox/bounds.py, `first_in_line`, where the machine has control groups), while `busy`
outside busy-loop processes keep the cores busy (they are always killed at the end). A grading whose
timing is unclear is timed once more, as the class run does (autograder/pipeline/grade.py,
TIMING_ATTEMPTS); its verdict is the last timing's. It times the reference `runs` times and each of the
four slow decoders of the mutant catalogue (autograder/audit/mutants/lab2.py: `recompute_without_cache`,
`rebuilds_caches`, `verifies_token_by_token`, `never_speculates`) `wrong` times, and prints one line per
grading, then:
- the false-failure rate: gradings of the reference that took its points on a clear verdict;
- the false-pass rate: gradings of a slow decoder that awarded its points (a clear pass; an unclear
  timing is held pending, never awarded);
- how many of each were held pending.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a student's helper processes that burn CPU while the grader times its baseline (they rest while the student's
# function runs: the function sets _running to 1); appended to a student's code by the audits and tests
BURN_HELPERS = '''
import multiprocessing as _mp
import time as _time

_running = _mp.Value("b", 0)


def _burn(running):
    while True:
        if running.value:
            _time.sleep(0.001)


_helpers = [_mp.Process(target=_burn, args=(_running,), daemon=True) for _ in range(2)]
for _h in _helpers:
    _h.start()
'''
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
GRADE_TIMEOUT_S = 900  # one speed-up check, at most
SLOW = ("recompute_without_cache", "rebuilds_caches", "verifies_token_by_token", "never_speculates")
ONE = """
import json, sys
from autograder.audit.mutants import lab2 as M, namespace
from autograder.checks import lab2 as C, timing
name = sys.argv[1]
mutant = None if name == "reference" else next(m for m in M.MUTANTS if m.name == name)
decode = namespace("lab2", mutant).speculative_decode
with timing.recording() as notes:
    try:
        r = C.check_speedup(decode)
        out = {"verdict": "undecided" if notes else "pass", "rounds": r["rounds"],
               "measured": {str(k): round(v, 3) for k, v in r["measured"].items()}, "notes": [str(n) for n in notes]}
    except timing.TimingFailure as err:
        out = {"verdict": "fail", "error": str(err)}
print("RESULT " + json.dumps(out))
"""


@contextmanager
def busy_loops(n: int, seconds: float = 3600):
    """n CPU-bound processes for the duration of the block; each stops by itself after `seconds`,
    and all are killed on exit whatever happened."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)], start_new_session=True)
             for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


def grade(decoder: str, timeout_s: float = GRADE_TIMEOUT_S) -> dict:
    """One grading of `decoder` ("reference" or a mutant's name): its speed-up check in a fresh interpreter,
    timed again while unclear, up to the class run's TIMING_ATTEMPTS; `attempts` says how many ran."""
    from autograder.pipeline.config import TIMING_ATTEMPTS

    t0 = time.monotonic()
    for attempt in range(1, TIMING_ATTEMPTS + 1):
        out = timed_once(decoder, timeout_s)
        if out["verdict"] != "undecided":
            break
    out["decoder"], out["seconds"], out["attempts"] = decoder, round(time.monotonic() - t0, 1), attempt
    return out


def timed_once(decoder: str, timeout_s: float = GRADE_TIMEOUT_S) -> dict:
    """One speed-up check of `decoder` in a fresh interpreter, in a control group of its own that comes first
    for the CPU (as the class run's timed phase is), where the machine has control groups."""
    from autograder.sandbox.bounds import Bounds, Group, available, first_in_line

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("SPECLAB_FAKE_TIMER", None)
    env.pop("SPECLAB_TIMING_LOCK", None)
    group = Group(f"timing-load-{time.monotonic_ns()}", Bounds()) if available()[0] else None
    try:
        with first_in_line(group):
            proc = subprocess.run((group.join_prefix() if group else []) + [sys.executable, "-c", ONE, decoder],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
    finally:
        if group is not None:
            group.remove()
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the speedup check crashed:\n{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def run(runs: int, wrong: int, busy: int, log=print) -> list[dict]:
    """`runs` gradings of the reference and `wrong` of each slow decoder, interleaved, one at a time."""
    order = ["reference"] * runs + [m for m in SLOW for _ in range(wrong)]
    order = [order[i] for i in sorted(range(len(order)), key=lambda i: (i % max(1, runs), i))]  # interleaved
    results = []
    with busy_loops(busy, seconds=len(order) * GRADE_TIMEOUT_S):  # they outlast every grading (killed at the end)
        for i, decoder in enumerate(order, 1):
            r = grade(decoder)
            results.append(r)
            what = r.get("error", "")[:160] if r["verdict"] == "fail" else f"{r['rounds']} rounds, speed-up {r['measured']}"
            if r.get("notes"):  # what was left unclear
                what += "; " + " | ".join(n[:200] for n in r["notes"])
            log(f"grading {i:2d}/{len(order)} {decoder:24s} {r['seconds']:6.1f} s  {r['verdict']:9s}  "
                f"(timed {r['attempts']}x)  {what}")
    return results


def rates(results: list[dict]) -> dict:
    ref = [r for r in results if r["decoder"] == "reference"]
    slow = [r for r in results if r["decoder"] != "reference"]
    count = lambda rs, v: sum(r["verdict"] == v for r in rs)  # noqa: E731
    return {"reference": len(ref), "false_failures": count(ref, "fail"), "reference_pending": count(ref, "undecided"),
            "slow": len(slow), "false_passes": count(slow, "pass"), "slow_pending": count(slow, "undecided"),
            "retimed": sum(r.get("attempts", 1) > 1 for r in results)}


def upper_95(k: int, n: int) -> float | None:
    """The one-sided 95 % Clopper-Pearson upper bound of a rate seen k times in n."""
    from scipy import stats

    return None if n == 0 else 1.0 if k >= n else float(stats.beta.ppf(0.95, k + 1, n - k))


def report(results: list[dict], busy: int, wall_s: float, load_before: list[float]) -> dict:
    """The committed report's body (autograder.audit.reports.write stamps it with its digest)."""
    from autograder.audit import reports
    from autograder.checks.lab2 import CELLS

    points = next(float(c.points) for c in CELLS if c.grade_id == "test_speedup")
    r = rates(results)
    students = {}
    for i, g in enumerate(results, 1):
        score = points if g["verdict"] == "pass" else 0.0
        if g["decoder"] == "reference":
            want, held = f"{points:g}, or held pending (never taken on a clear verdict)", g["verdict"] != "fail"
        else:
            want, held = "0 on a clear verdict, or held pending (never awarded)", g["verdict"] != "pass"
        students[f"{i:02d}_{g['decoder']}"] = {
            "cells": {"test_speedup": {"score": score, "expected": want, "held": held}}, "score": score,
            "pending": {"test_speedup": points} if g["verdict"] == "undecided" else {},
            "verdict": g["verdict"], "timed": g["attempts"], "seconds": g["seconds"]}
    return {
        "command": "make audit timing_load", "wall_s": round(wall_s, 1), "machine": reports.machine(),
        "load": {"loadavg_before": load_before, "loadavg_after": reports.loadavg(), "busy_loops": busy},
        "rates": {**r, "false_failure_upper_95": upper_95(r["false_failures"], r["reference"]),
                  "false_pass_upper_95": upper_95(r["false_passes"], r["slow"])},
        "tests": {"no slow decoder is awarded the speed-up (no false pass)":
                  "passed" if r["false_passes"] == 0 else "failed",
                  "the reference never loses the speed-up on a clear verdict (no false failure)":
                  "passed" if r["false_failures"] == 0 else "failed",
                  "every grading ran to a verdict": "passed" if len(results) == r["reference"] + r["slow"] else "failed"},
        "students": students, "left_behind": reports.left_behind(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="gradings of the reference")
    ap.add_argument("--wrong", type=int, default=5, help="gradings of each of the four slow decoders")
    ap.add_argument("--busy", type=int, default=2, help="outside busy-loop processes")
    ap.add_argument("--report", action="store_true", help="write autograder/audit/reports/timing_load.json")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the busy loops are killed on a kill too
    t0 = time.monotonic()
    from autograder.audit import reports

    load_before = reports.loadavg()
    results = run(args.runs, args.wrong, args.busy)
    r = rates(results)
    if args.report:
        path = reports.write("timing_load", report(results, args.busy, time.monotonic() - t0, load_before))
        print(f"report written to {path.relative_to(ROOT)}")
    print(f"\nunder {args.busy} busy loops, one grading at a time ({time.monotonic() - t0:.0f} s, load average "
          f"{os.getloadavg()[0]:.1f}):\n"
          f"  reference: {r['false_failures']}/{r['reference']} false failures (points taken on a clear verdict), "
          f"{r['reference_pending']}/{r['reference']} held pending\n"
          f"  slow decoders: {r['false_passes']}/{r['slow']} false passes (points awarded), "
          f"{r['slow_pending']}/{r['slow']} held pending\n"
          f"  {r['retimed']}/{len(results)} gradings timed a second time (the first timing unclear)")


if __name__ == "__main__":
    main()
