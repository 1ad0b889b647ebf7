"""Which baseline holds Lab 1's speed ratio still? `python -m benchmarks.lab1_baseline [--processes N] [--seconds S]`

Lab 1's speed test (`speclab.speedtest.batch_speedup`) used to divide the per-row time of a Python loop
(`draws_loop` below: a draft from q and one uniform, row by row) by the per-row time of the student's
vectorised `speculative_sample_batch`. On a shared virtual machine the two kinds of code do not slow down
together: the interpreter's loop is slowed by whatever else shares the core far more than numpy's
vectorised passes are, so the ratio moved with the machine's state, from one second to the next and from
one process to the next, however the rounds were paired; the audit `timing_agreement` found Lab 1's notebook
and grader figures, each the median of its own rounds, more than 25 % apart in some quiet runs.

This benchmark measures the drift of that ratio beside the drift of the speed test's baseline now, code of
the same kind as the code it times: `speedtest.draws_vectorised`, the same two draws for every row, made by
numpy over the whole batch. It starts `--processes` fresh interpreters one after another, alternating the
lab's reference and the plainest correct implementation (`autograder.audit.correct`), and each times
rounds of three calls for `--seconds`, every round on a fresh pair (`speedtest.batch_pair`): the loop over
`LOOP_ROWS` rows, the student's function over `BATCH_ROWS` rows and `draws_vectorised` over `BATCH_ROWS`
rows, each on this process's CPU clock (`speclab.clock.cpu_time`), the rows built inside the timed call as
the speed test builds them. Per round it forms the two ratios:

- loop:       the former speed test's figure, (loop seconds / LOOP_ROWS) / (student seconds / BATCH_ROWS);
- vectorised: the speed test's figure now, (draws_vectorised seconds) / (student seconds), both over BATCH_ROWS rows.

The drift of a ratio is the largest over the smallest median, of one-second windows within a process and
of whole processes for one implementation. It prints one line per implementation and baseline,
`lab1_baseline impl=<name> baseline=<loop|vectorised> median=<x> window_drift=<x> process_drift=<x>`, then
a table, and writes the figures to --out (default benchmarks/cpu/lab1_baseline.json).
"""
from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMPLS = ("reference", "batch_plain")
BASELINES = ("loop", "vectorised")
WINDOW_S = 1.0
LOOP_ROWS = 500  # rows of one call of the former baseline


def draws_loop(p_rows: np.ndarray, q_rows: np.ndarray, rng: np.random.Generator) -> None:
    """Lab 1's former baseline: a Python loop making, for each row, the two random draws every one-position
    speculative sampler makes (a draft from q, one uniform), and nothing else."""
    vocab = q_rows.shape[1]
    for b in range(len(q_rows)):
        rng.choice(vocab, p=q_rows[b])
        rng.random()


def drift(medians: list[float]) -> float:
    """Largest over smallest of a list of positive medians (1.0: no drift; NaN with fewer than two)."""
    return max(medians) / min(medians) if len(medians) >= 2 else float("nan")


def windows(times: list[float], values: list[float], width: float = WINDOW_S) -> list[float]:
    """Medians of `values` in consecutive windows of `width` seconds of `times` (seconds from the start), in
    order. The last window is dropped when it spans less than half a width: too few rounds for a median."""
    groups: dict[int, list[float]] = {}
    for t, v in zip(times, values):
        groups.setdefault(int(t // width), []).append(v)
    if times and times[-1] - width * int(times[-1] // width) < width / 2:
        groups.pop(int(times[-1] // width), None)
    return [statistics.median(groups[i]) for i in sorted(groups)]


def child(impl: str, seconds: float) -> dict:
    """One process: rounds of the three timed calls for `seconds`; per baseline, the ratios' windows."""
    from autograder.audit.correct import CORRECT
    from autograder.audit.mutants import namespace
    from speclab import speedtest
    from speclab.clock import cpu_time, steady_allocator

    steady_allocator()  # as the speed test does
    ns = namespace("lab1", next((m for m in CORRECT["lab1"] if m.name == impl), None))
    student = ns.speculative_sample_batch
    pairs, rng = np.random.default_rng(4), np.random.default_rng(3)
    big, small = speedtest.BATCH_ROWS, LOOP_ROWS
    now: dict = {}

    def loop() -> None:
        draws_loop(now["small_p"], now["small_q"], rng)

    def batch() -> None:
        student(np.tile(now["p"], (big, 1)), np.tile(now["q"], (big, 1)), rng)

    def vectorised() -> None:
        speedtest.draws_vectorised(np.tile(now["p"], (big, 1)), np.tile(now["q"], (big, 1)), rng)

    stamps, ratios = [], {b: [] for b in BASELINES}
    start = time.monotonic()
    for rnd in itertools.count():
        now["p"], now["q"] = speedtest.batch_pair(pairs)
        now["small_p"], now["small_q"] = np.tile(now["p"], (small, 1)), np.tile(now["q"], (small, 1))
        t_loop, t_batch, t_vec = cpu_time(loop), cpu_time(batch), cpu_time(vectorised)
        if rnd == 0:
            continue  # warm-up
        stamps.append(time.monotonic() - start)
        ratios["loop"].append(t_loop * big / small / t_batch)
        ratios["vectorised"].append(t_vec / t_batch)
        if stamps[-1] >= seconds:
            break
    return {"impl": impl, "rounds": len(stamps),
            "baselines": {b: {"median": statistics.median(r), "windows": windows(stamps, r)}
                          for b, r in ratios.items()}}


def summarise(runs: list[dict]) -> dict:
    """Per implementation and baseline: the median of process medians, the largest window drift within a
    process, and the drift of the process medians."""
    out: dict = {}
    for impl in sorted({r["impl"] for r in runs}):
        mine = [r for r in runs if r["impl"] == impl]
        out[impl] = {}
        for b in BASELINES:
            meds = [r["baselines"][b]["median"] for r in mine]
            out[impl][b] = {"median": statistics.median(meds),
                            "process_medians": [round(m, 4) for m in meds],
                            "process_drift": drift(meds),
                            "window_drift": max(drift(r["baselines"][b]["windows"]) for r in mine)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=8, help="fresh interpreters, alternating the implementations")
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per process")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "cpu" / "lab1_baseline.json")
    ap.add_argument("--child", nargs=2, metavar=("IMPL", "SECONDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child[0], float(args.child[1]))))
        return
    if args.processes < 2 * len(IMPLS):
        ap.error(f"--processes must be at least {2 * len(IMPLS)}: two per implementation, for a process drift")
    from tqdm import tqdm

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    load_before = os.getloadavg()[0]
    runs = []
    for i in tqdm(range(args.processes), desc="processes", unit="proc"):
        impl = IMPLS[i % len(IMPLS)]
        cmd = [sys.executable, "-m", "benchmarks.lab1_baseline", "--child", impl, str(args.seconds)]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            sys.exit(f"process {i} ({impl}) failed, exit {proc.returncode}:\n{proc.stderr[-3000:]}")
        runs.append(json.loads(line[len("RESULT "):]))
    summary = summarise(runs)
    for impl, per in summary.items():
        for b, s in per.items():
            print(f"lab1_baseline impl={impl} baseline={b} median={s['median']:.4g} "
                  f"window_drift={s['window_drift']:.3f} process_drift={s['process_drift']:.3f}")
    print(f"\n{'implementation':<14} {'baseline':<11} {'median':>9} {'drift in 1 s windows':>21} "
          f"{'drift across processes':>23}")
    for impl, per in summary.items():
        for b, s in per.items():
            print(f"{impl:<14} {b:<11} {s['median']:>9.4g} {s['window_drift']:>21.3f} {s['process_drift']:>23.3f}")
    record = {"command": " ".join(["python -m benchmarks.lab1_baseline"] + sys.argv[1:]),
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]},
              "seconds_per_process": args.seconds, "window_s": WINDOW_S,
              "summary": summary, "runs": runs}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
