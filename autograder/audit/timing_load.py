"""False failures of Lab 2's speedup check for the reference, measured on a loaded machine.

    python -m autograder.audit.timing_load [--runs 20] [--workers 2] [--busy 2]

Runs the hidden speedup check (autograder.checks.lab2.check_speedup) on the reference
decoder `runs` times, `workers` at a time, each in its own interpreter as in a grading
kernel, all sharing one graders' timing lock file as the pipeline's workers do, while
`busy` busy-loop processes keep the cores busy (they are always killed at the end).
Prints one line per grading and the count of false failures (a clear timing verdict
against the reference).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
ONE = """
import json, sys
from autograder.authoring import reference
from autograder.checks import lab2 as C
from autograder.checks.timing import TimingFailure
ref = reference.load("lab2")
try:
    r = C.check_speedup(ref.speculative_decode)
    out = {"failed": False, "rounds": r["rounds"], "verdicts": r["verdicts"],
           "measured": {str(k): round(v, 3) for k, v in r["measured"].items()},
           "theory_ratio": {str(k): round(v, 3) for k, v in r["theory_ratio"].items()}}
except TimingFailure as err:
    out = {"failed": True, "error": str(err)}
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


def grade_reference(lock: Path, timeout_s: float = 900) -> dict:
    """One speedup check of the reference in a fresh interpreter holding the shared lock file."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env["SPECLAB_TIMING_LOCK"] = str(lock)
    env.pop("SPECLAB_FAKE_TIMER", None)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", ONE], env=env, capture_output=True, text=True, timeout=timeout_s)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"the speedup check crashed:\n{proc.stderr[-3000:]}")
    out = json.loads(line[len("RESULT "):])
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


def run(runs: int, workers: int, busy: int, log=print) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp, busy_loops(busy):
        lock = Path(tmp) / "timing.lock"
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            results = []
            for i, r in enumerate(pool.map(lambda _: grade_reference(lock), range(runs)), 1):
                results.append(r)
                what = ("FALSE FAILURE: " + r["error"][:200]) if r["failed"] else (
                    f"{r['rounds']} rounds, verdicts {r['verdicts']}, speedup {r['measured']}, "
                    f"measured/predicted {r['theory_ratio']}")
                log(f"grading {i:2d}/{runs}: {r['seconds']:6.1f} s  {what}")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--busy", type=int, default=2)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the busy loops are killed on a kill too
    t0 = time.monotonic()
    results = run(args.runs, args.workers, args.busy)
    failed = sum(r["failed"] for r in results)
    print(f"\nfalse failures of the speedup check for the reference: {failed}/{len(results)} "
          f"({args.workers} workers, {args.busy} busy loops, load average {os.getloadavg()[0]:.1f}, "
          f"{time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
