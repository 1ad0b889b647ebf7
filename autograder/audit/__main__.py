"""Run the audits and write their committed reports (`make audit`).

    python -m autograder.audit               # every audit whose report is missing, stale or not held
    python -m autograder.audit NAME ...      # these audits (names: --list)
    python -m autograder.audit --all         # every audit, and the visible and power reports of each lab
    python -m autograder.audit --list        # each audit, what it does, and whether its report holds

An audit that starts busy loops runs alone; the others run one after another too, so that each report's
load figures are its own, and each starts once the machine is quiet (at most 15 % of the CPU busy over 2 s,
waited for up to 2 minutes). Each audit's output goes to _build/audit/NAME.log; the console gets one line per
audit. Exit status 1 when an audit's report does not hold afterwards (a verdict not held, or a failure).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

from . import reports

ROOT = reports.ROOT
LOGS = ROOT / "_build" / "audit"
# Reports that predate this runner and keep their own form and staleness check (tests/autograder/audit/
# test_visible.py, tests/autograder/checks/test_lab1.py and test_lab2.py): rewritten with --all, or by name.
EXTRA = {
    "visible_lab1": ("-m", "autograder.audit.visible", "lab1", "--write"),
    "visible_lab2": ("-m", "autograder.audit.visible", "lab2", "--write"),
    "power_lab1": ("-m", "autograder.audit.power", "lab1", "--json", "autograder/audit/mutants/lab1_power.json"),
    "power_lab2": ("-m", "autograder.audit.power", "lab2", "--json", "autograder/audit/mutants/lab2_power.json"),
}
EXTRA_STALE = {"visible_lab1": ("-m", "autograder.audit.visible", "lab1", "--check"),
               "visible_lab2": ("-m", "autograder.audit.visible", "lab2", "--check")}


def command(name: str) -> list[str]:
    if name in EXTRA:
        return [sys.executable, *EXTRA[name]]
    audit = reports.AUDITS[name]
    if audit.command:
        return [sys.executable, *audit.command]
    return [sys.executable, "-m", "pytest", str(audit.module.relative_to(ROOT)), "--audit", name,
            "-p", "no:cacheprovider", "-s", "-q"]


def extra_is_stale(name: str) -> bool:
    check = EXTRA_STALE.get(name)
    return check is not None and subprocess.run([sys.executable, *check], cwd=ROOT, capture_output=True).returncode != 0


def busy_fraction(window_s: float = 2.0) -> float | None:
    """The share of the machine's CPU time that was not idle over the next window_s seconds (/proc/stat;
    None where there is none)."""
    def counters() -> tuple[int, int]:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # all, idle + iowait

    try:
        total0, idle0 = counters()
        time.sleep(window_s)
        total1, idle1 = counters()
    except (OSError, ValueError, IndexError):
        return None
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


QUIET = 0.15  # an audit starts once at most this share of the CPU is busy (what the previous audit left winds down)
QUIET_WAIT_S = 120


def wait_until_quiet() -> str:
    """Wait, up to QUIET_WAIT_S, until the machine is quiet; say how long it took, or that it stayed busy."""
    t0 = time.monotonic()
    while True:
        busy = busy_fraction()
        if busy is None or busy <= QUIET:
            return f"quiet after {time.monotonic() - t0:.0f} s" if busy is not None else "no /proc/stat"
        if time.monotonic() - t0 > QUIET_WAIT_S:
            return f"STILL BUSY after {QUIET_WAIT_S} s ({busy:.0%} of the CPU): its figures may show it"


def run(name: str) -> bool:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name}.log"
    quiet = wait_until_quiet()
    t0 = time.monotonic()
    print(f"audit {name}: started {time.strftime('%H:%M:%S')}, {quiet} (log: {log.relative_to(ROOT)})", flush=True)
    with open(log, "w") as out:
        proc = subprocess.run(command(name), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - t0
    if name in EXTRA:
        ok = proc.returncode == 0
        why = [] if ok else [f"exit status {proc.returncode}: see {log.relative_to(ROOT)}"]
    else:
        why = reports.problems(name)
        if proc.returncode != 0 and not why:
            why = [f"exit status {proc.returncode}: see {log.relative_to(ROOT)}"]
        ok = not why
    print(f"audit {name}: {'held' if ok else 'NOT HELD'} in {wall:.0f} s" + "".join(f"\n  {w}" for w in why),
          flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.audit", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="audits to run (default: those whose report does not hold)")
    ap.add_argument("--all", action="store_true", help="every audit, and the visible and power reports")
    ap.add_argument("--list", action="store_true", help="list the audits and whether each report holds")
    a = ap.parse_args(argv)
    known = [*reports.AUDITS, *EXTRA]
    if a.list:
        for name, audit in reports.AUDITS.items():
            why = reports.problems(name)
            print(f"{name:18s} {'holds' if not why else why[0]}\n{'':18s} {audit.doc}")
        for name in EXTRA:
            print(f"{name:18s} {'stale' if extra_is_stale(name) else 'its own check'}")
        return 0
    unknown = [n for n in a.names if n not in known]
    if unknown:
        ap.error(f"no audit named {', '.join(unknown)} (audits: {', '.join(known)})")
    names = known if a.all else a.names or [*reports.stale(), *(n for n in EXTRA_STALE if extra_is_stale(n))]
    if not names:
        print("every audit's report holds for this tree: nothing to run (--all runs them all again)")
        return 0
    t0 = time.monotonic()
    print(f"{len(names)} audit(s): {', '.join(names)}", flush=True)
    held = [run(name) for name in names]
    print(f"{sum(held)} of {len(names)} held, {time.monotonic() - t0:.0f} s in all")
    return 0 if all(held) else 1


if __name__ == "__main__":
    sys.exit(main())
