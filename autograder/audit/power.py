"""False-failure bounds of the hidden tests and their power against every mutant.

    .venv/bin/python -m autograder.audit.power lab1            # print the tables
    .venv/bin/python -m autograder.audit.power lab1 --json F   # also write them to F
    .venv/bin/python -m autograder.audit.power lab1 --show F   # print a saved report, recompute nothing

The committed reports are autograder/audit/mutants/<lab>_power.json. A mutant whose bound needs more fresh
draws than the default cap (a law just past eps) has its own cap recorded there (`fresh_draws_cap`), and
this command uses it, so that it reproduces the committed report as shipped; it exits 0 when every mutant
is caught with probability >= 0.999 (or only a timed cell could catch it).

Notation: see the `speclab` package docstring.

Per statistical case (`autograder.checks.stats`): n, the number K of outcomes, eps
(every output law at total variation >= eps from the exact one fails the case with
probability >= 0.999: the worst case over all laws, exact binomial tails) and
McDiarmid's bound on the probability that a correct implementation fails it; a
cell's false-failure bound is the sum over its cases (union bound). The bounds hold
for any seed (a grading run draws its seeds from its key, autograder/checks/hidden.py).
Deterministic cells (no randomness) cannot fail a correct implementation (their tolerance is 1e-9 on exactly computed values).

Detection (power) of a mutant, in the part it breaks:
* by a deterministic cell without randomness: 1 if the check fails, else 0;
* by a statistical case: M fresh draws of the mutant (other seeds, M = min(draws
  scale x n, max draws)); the first half picks the outcomes the mutant favours, the
  second half gives a Clopper-Pearson lower end (level 1 - 1e-4) of their
  probability, and the exact binomial probability that the hidden test's total
  variation reaches its threshold through them is taken (`stats.power_from_outcomes`):
  a lower bound on the power. A draw that violates the
  output contract (wrong length, crash) is an outcome of probability 0 under a
  correct implementation: the power is then at least 1 - (1 - rho)^n with rho
  the Clopper-Pearson lower end of the violation rate;
* by a statistical case whose outcomes come in dependent blocks (its draw's `block`: Lab 2's token
  cases, the tokens of one decode): fresh whole blocks, the set picked on the first half, Hoeffding
  over the second half's blocks and over the hidden test's whole blocks (`power_from_blocks`);
* by the independence tests of a stream or batch case (autograder/checks/independence.py): a mutant
  whose every fresh hidden test repeats its draws exactly at some lag, or has two rows that emit the same
  token in every call (the classes those tests cover), is
  caught with probability 1, whatever the seed; membership of that class is observed on 2 fresh
  hidden tests of the mutant.
* by a case with tail tests of its own (Lab 1's 32,000-token pair, autograder/checks/lab1_ranks.py: the case
  provides false_failure and power_from_outcomes): 2 fresh hidden tests, a Clopper-Pearson interval for the
  probability of each tail set, and the exact binomial probability of the most powerful test at its worse end.
The mutant's detection probability is the largest lower bound over its part's cells
(the search stops at the first cell or case that reaches 0.999). The mutants are judged under a
key drawn for the report, as a grading run draws one (autograder/checks/hidden.py): seeds and
relabelled pairs the mutants cannot know in advance. The case table and the false-failure bounds
hold for every key (a relabelling changes no design figure).

A lab may add `class_power()`: for a class of wrong implementations (Lab 1: samplers that cut a distribution to
its top m entries, every m), the least power over its members at total variation >= a stated eps, computed from
their exact laws; the report prints it and the command exits 1 when one is below 0.999.

What a lab provides: `autograder.checks.<lab>` with CELLS (CellSpec list: a deterministic cell's
`note` says why a correct implementation cannot fail it, and `randomised=True` marks a deterministic
cell whose verdict on a wrong implementation may depend on the seed or the machine; timings are
skipped here), ALPHA_CELL, an optional report_extra(grade_id, reference_module) -> str;
`autograder.audit.mutants.<lab>` with MUTANTS; `solutions/<lab>/<lab>.md`, whose reference solution `autograder.authoring.reference` loads.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats as st
from tqdm import tqdm

from autograder.checks import hidden
from autograder.checks.independence import DependenceFailure
from autograder.checks.stats import (ExactnessCase, case_eps, case_false_failure_bound, early_passes,
                                     power_from_outcomes)
from autograder.authoring import reference as reference_solution
from autograder.audit.mutants import Mutant, namespace

CONF_FAIL = 1e-4
TARGET = 0.999


def _violation_power(case: ExactnessCase, bad: int, total: int, chunk: int) -> float:
    """Lower bound on P(detect) from the rate of draws (or chunks) that break the contract."""
    rho = st.beta.ppf(CONF_FAIL, bad, total - bad + 1) if bad > 0 else 0.0
    looks = early_passes(case.n, case.eps)
    draws = (looks[0][0] if looks else case.n) / chunk  # independent tries before the first chance to pass
    return float(1 - (1 - rho) ** draws)


def power_from_blocks(case: ExactnessCase, alpha: float, blocks: np.ndarray, conf_fail: float = CONF_FAIL) -> float:
    """Power lower bound of a case whose outcomes come in dependent blocks (draw.block outcomes to a call: the
    tokens of one decode), from fresh blocks [m, L] of the implementation.

    The first half of the blocks picks A = {i : P_half(i) > P(i)}; each block of the second half gives its rate
    of outcomes in A, independent across blocks and in [0, 1], whose mean has the lower end mu (Hoeffding, level
    1 - conf_fail). The case fails when N_A / n >= P(A) + tau (then TV >= tau), which the hidden test's whole
    blocks alone reach with probability >= 1 - exp(-2 B gap^2) (Hoeffding over its B whole blocks); each early
    look passes only when N_A / m_j < P(A) + t_j, with probability <= exp(-2 B_j gap_j^2). The bound is the
    first minus the sum of the others (0 when negative), valid however the outcomes of a block depend on each
    other."""
    from autograder.checks.stats import threshold

    law = np.asarray(case.law, dtype=float)
    m, L = blocks.shape
    half = m // 2
    favoured = np.bincount(blocks[:half].ravel(), minlength=len(law)) / (half * L) > law
    if half == 0 or not favoured.any():
        return 0.0
    p_set = float(law[favoured].sum())
    rates = favoured[blocks[half:]].mean(axis=1)
    mu = float(rates.mean()) - math.sqrt(math.log(1 / conf_fail) / (2 * len(rates)))

    looks = early_passes(case.n, case.eps)
    sizes = [mj for mj, _ in looks] + [case.n]
    whole, done, total = [], 0, 0  # whole blocks by each look: a look draws ceil((m_j - done) / L) blocks
    for size in sizes:
        total += (size - done) // L
        whole.append(total)
        done = size

    def bound(n_out: int, blocks_whole: int, cut: float) -> float:  # exp(-2 B gap^2), 1 without a positive gap
        gap = mu - n_out * (p_set + cut) / (blocks_whole * L) if blocks_whole else -1.0
        return math.exp(-2 * blocks_whole * gap * gap) if gap > 0 else 1.0

    power = 1.0 - bound(case.n, whole[-1], threshold(law, case.n, alpha))
    for (mj, tj), bj in zip(looks, whole):
        power -= bound(mj, bj, tj)
    return max(0.0, power)


def case_power(case: ExactnessCase, alpha_case: float, fn, seed: int, draws: int, chunk: int) -> float:
    """Power lower bound of one case against fn, from `draws` fresh draws taken `chunk` at a time (a case whose
    draw has `block` takes whole blocks and is bounded by power_from_blocks)."""
    rng = np.random.default_rng(seed)
    block = getattr(case.draw, "block", 1)
    outcomes, bad, total, certain = [], 0, 0, 0
    for _ in range(max(1, draws // chunk)):
        total += 1
        try:
            outcomes.append(np.asarray(case.draw(fn, rng, chunk)).astype(np.int64))
        except DependenceFailure as err:
            # draws that repeat exactly at a lag with enough pairs fail with probability 1 (independence.py)
            bad += 1
            certain += err.exact_repeat
            if bad >= 2:
                break
        except Exception:  # noqa: BLE001 - any crash or contract violation counts as detected
            bad += 1
            # enough to show a violation rate: stop early (a block case, whose violations are rarer per draw,
            # once the rate it shows reaches the target)
            if bad >= 5 and (block == 1 or _violation_power(case, bad, total, chunk) >= TARGET):
                break
    if bad and certain == total:
        LAST_TV[0] = float("nan")
        return 1.0
    if bad:
        return _violation_power(case, bad, total, chunk)
    if block > 1:
        blocks = np.concatenate(outcomes).reshape(-1, block)
        LAST_TV[0] = 0.5 * float(np.abs(np.bincount(blocks.ravel(), minlength=len(case.law)) / blocks.size
                                        - case.law).sum())
        return power_from_blocks(case, alpha_case, blocks)
    outcomes = np.concatenate(outcomes)
    LAST_TV[0] = 0.5 * float(np.abs(np.bincount(outcomes, minlength=len(case.law)) / len(outcomes) - case.law).sum())
    if hasattr(case, "power_from_outcomes"):  # a case with tests of its own (lab1_ranks.RankCase)
        return case.power_from_outcomes(alpha_case, outcomes, CONF_FAIL)
    return power_from_outcomes(case, alpha_case, outcomes, CONF_FAIL)


LAST_TV = [float("nan")]  # TV between the last case_power's fresh draws and the exact law (noise included)


def _eps(case, alpha_case: float) -> float | None:
    """A distance test's eps over every law; a case with tests of its own states its eps over a class (`class_eps`)."""
    return getattr(case, "class_eps", None) if hasattr(case, "false_failure") else case_eps(case, alpha_case)


def committed_report(lab: str) -> dict:
    """The committed report of lab ({} when there is none)."""
    path = Path(__file__).with_name("mutants") / f"{lab}_power.json"
    return json.loads(path.read_text()) if path.exists() else {}


def lab_power(lab: str, draws_scale: int = 10, only: list[str] | None = None, max_draws: int = 20000,
              skip_eps: bool = False) -> dict:
    # per-mutant caps on fresh draws that the committed report records (a mutant near eps needs more)
    caps = {m["name"]: m["fresh_draws_cap"] for m in committed_report(lab).get("mutants", [])
            if m.get("fresh_draws_cap")}
    checks = importlib.import_module(f"autograder.checks.{lab}")
    catalog: list[Mutant] = importlib.import_module(f"autograder.audit.mutants.{lab}").MUTANTS
    reference = reference_solution.load(lab)
    report = {"lab": lab, "alpha_cell": checks.ALPHA_CELL, "cells": [], "mutants": []}
    for cell in checks.CELLS:
        entry = {"grade_id": cell.grade_id, "part": cell.part, "points": cell.points}
        if cell.cases is None:
            extra = getattr(checks, "report_extra", lambda grade_id, ns: "")(cell.grade_id, reference)
            entry.update(kind="deterministic", false_failure=0.0,
                         note=cell.note + extra)
        else:
            cases = cell.cases()
            alpha_case = checks.ALPHA_CELL / len(cases)
            bounds = {c.name: c.false_failure(alpha_case) if hasattr(c, "false_failure")
                      else case_false_failure_bound(c, alpha_case) for c in cases}
            worst = getattr(checks, "worst_case_eps", lambda name, n, alpha: None)  # knobs drawn per run
            table = [{"case": c.name, "n": c.n, "outcomes": len(c.law), "guarantee": c.guarantee,
                      "eps": None if skip_eps else _eps(c, alpha_case), "false_failure": bounds[c.name],
                      "eps_over_range": None if skip_eps else worst(c.name, c.n, alpha_case)}
                     for c in tqdm(cases, desc=f"eps of {cell.grade_id}", file=sys.stderr, leave=False)]
            from autograder.checks.independence import ALPHA_LAGS, ALPHA_PAIRS

            entry.update(kind="statistical", false_failure=sum(bounds.values()), cases=bounds,
                         lag_false_failure=sum(c.lag_calls for c in cases) * ALPHA_LAGS,
                         pair_false_failure=sum(c.pair_tests for c in cases) * ALPHA_PAIRS,
                         n={c.name: c.n for c in cases}, table=table)
        report["cells"].append(entry)

    if hasattr(checks, "class_power"):
        report["classes"] = checks.class_power()
    key = hidden.new_key()  # the instance the mutants meet: unknown to them, as in a grading run
    for m in tqdm([m for m in catalog if only is None or m.name in only], desc="mutants", file=sys.stderr):
        with hidden.keyed(key):
            report["mutants"].append(_mutant_power(lab, checks, m, caps, draws_scale, max_draws))
    return report


def _mutant_power(lab: str, checks, m: Mutant, caps: dict, draws_scale: int, max_draws: int) -> dict:
    """The report's entry of one mutant: its detection lower bound and the cell (case) that gives it."""
    ns = namespace(lab, m)
    best, via = 0.0, None
    # timed cells that call the replaced function, in any part (a correct but slow decoder of part 2 loses
    # part 3's speedup points): their verdict depends on the machine, so they are named, not bounded
    timed = [c.grade_id for c in checks.CELLS if c.cases is None and c.randomised
             and m.replaces in c.args]
    seen_tv = None
    t0 = time.perf_counter()
    for cell in [c for c in checks.CELLS if c.part == m.part]:
        args = [getattr(ns, a) for a in cell.args]
        if cell.cases is None:
            if cell.randomised:
                continue  # its outcome for a wrong implementation may depend on the seed or the machine
            try:
                cell.check(*args)
            except Exception:  # noqa: BLE001
                best, via = 1.0, cell.grade_id
                break
            continue
        cases = cell.cases()
        alpha_case = checks.ALPHA_CELL / len(cases)
        for i, case in enumerate(cases):
            whole = case.batched or case.stream or hasattr(case, "power_from_outcomes")
            chunk = case.n if whole else getattr(case.draw, "block", 1)
            # a batched (or stream) case is drawn in whole hidden tests: at most 2 of them
            cap = max(max_draws, caps.get(m.name, 0))
            draws = case.n * min(draws_scale, 2) if whole else max(1, min(draws_scale * case.n, cap))
            power = case_power(case, alpha_case, args[0], seed=1000 + i, draws=draws, chunk=chunk)
            if power > best:
                best, via = power, f"{cell.grade_id}: {case.name}"
                seen_tv = (LAST_TV[0], _eps(case, alpha_case))
            if best >= TARGET:
                break
        if best >= TARGET:
            break
    if best < 1e-3 and timed:  # only a timing (or seed-dependent) cell could catch it: not bounded here
        via = f"timing only ({', '.join(timed)}; not computed here)"
    entry = {"name": m.name, "part": m.part, "doc": m.doc, "detection": best, "via": via, "tv_eps": seen_tv,
             "seconds": round(time.perf_counter() - t0, 1)}
    if m.name in caps and caps[m.name] > max_draws:
        entry["fresh_draws_cap"] = caps[m.name]
    return entry


def _timing_only(m: dict) -> bool:
    return str(m["via"]).startswith("timing only")


def print_report(report: dict) -> None:
    print(f"Lab {report['lab']}: hidden test cells (false-failure budget {report['alpha_cell']:.0e} per cell)")
    print(f"{'cell':28s} {'part':>4s} {'points':>6s}  false-failure probability (correct implementation)")
    for c in report["cells"]:
        how = c["note"] if c["kind"] == "deterministic" else (
            f"<= {c['false_failure']:.2e} (McDiarmid, union bound over {len(c['cases'])} cases)"
            + (f" + {c['lag_false_failure']:.1e} (independence at every lag)" if c.get("lag_false_failure") else "")
            + (f" + {c['pair_false_failure']:.1e} (independence of any two rows)" if c.get("pair_false_failure")
               else ""))
        print(f"{c['grade_id']:28s} {c['part']:>4d} {c['points']:>6d}  {how}")
    print(f"\nStatistical cases: any output law at total variation >= eps from the exact one fails with "
          f"probability >= {TARGET}")
    print(f"{'case':92s} {'n':>7s} {'K':>5s} {'eps':>7s}  {'false failure':>13s}")
    for c in report["cells"]:
        for row in c.get("table", []):
            eps = "-" if row["eps"] is None else f"{row['eps']:.4f}"
            print(f"{row['case'][:92]:92s} {row['n']:>7d} {row['outcomes']:>5d} {eps:>7s}  <= {row['false_failure']:.2e}")
    ranged = [row for c in report["cells"] for row in c.get("table", []) if row.get("eps_over_range")]
    if ranged:
        print("Knobs drawn per grading run, or for every decode: the worst eps over each range")
        for row in ranged:
            print(f"  {row['case']}: eps <= {row['eps_over_range']:.4f} at every setting of its range")
    classes: dict[str, list[str]] = {}  # what a case's outcome is: the class of wrong implementations it covers
    for c in report["cells"]:
        for row in c.get("table", []):
            classes.setdefault(row.get("guarantee") or "the law of one outcome", []).append(row["case"])
    print("What the cases certify: every implementation whose law of the outcome below is at total variation >= eps "
          "from the exact one fails")
    for guarantee, cases in classes.items():
        print(f"  {guarantee}: {len(cases)} case(s), e.g. {cases[0]}")
    parts: dict[int, int] = {}
    for c in report["cells"]:
        parts[c["part"]] = parts.get(c["part"], 0) + c["points"]
    print("points per part: " + ", ".join(f"part {k}: {v}" for k, v in sorted(parts.items()))
          + f" (total {sum(parts.values())})")
    for c in report.get("classes", []):
        print(f"\n{c['case']} and {c['coupling']}: every sampler of the class below at total variation >= "
              f"{c['eps']} from p fails with probability >= the least power (exact binomial tails, every m)")
        for family, f in c["families"].items():
            at = f"at m = {f['at']['m']} (TV {f['at']['tv']:.4f})" if f["at"] else "no member"
            flag = "" if f["least_power"] is None or f["least_power"] >= TARGET else "   <-- BELOW 0.999"
            least = "-" if f["least_power"] is None else f"{f['least_power']:.6f}"
            print(f"  {family:9s} {f['members']:>6d} members, least power {least} {at}{flag}")
            print(f"  {'':9s} {f['doc']}")
    print("\nMutants: probability that the hidden tests of the broken part catch each one (lower bound)")
    for m in report["mutants"]:
        flag = "" if m["detection"] >= TARGET or _timing_only(m) else "   <-- BELOW 0.999"
        miss = 1 - m["detection"]
        shown = f">= 1 - {miss:.1e}" if miss > 0 else "= 1 (to double precision)"
        print(f"{m['name']:38s} part {m['part']}  {shown:24s} via {m['via']}{flag}")
        print(f"{'':38s}   {m['doc']}")
        if m.get("tv_eps") and m["tv_eps"][0] == m["tv_eps"][0]:
            tv, eps = m["tv_eps"]
            if tv >= eps:
                print(f"{'':38s}   on that case: TV of its fresh draws {tv:.4f} (eps {eps:.4f}, ratio {tv / eps:.2f})")
            else:  # its draws' law is near the exact one: what fails is a rule of the case, not the law
                print(f"{'':38s}   on that case: TV of its fresh draws {tv:.4f} is below eps {eps:.4f}: caught by "
                      "a rule of the case (an error, an impossible outcome), not by its law")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--draws-scale", type=int, default=10, help="fresh draws per case = this x the test's n")
    parser.add_argument("--max-draws", type=int, default=20000, help="cap on fresh draws per case (not batched)")
    parser.add_argument("--only", nargs="*", help="mutant names (none: the case table only)")
    parser.add_argument("--show", type=Path, help="print this saved report instead of computing one")
    args = parser.parse_args(argv)
    if args.show:
        print_report(json.loads(args.show.read_text()))
        return 0
    warnings.simplefilter("ignore")
    report = lab_power(args.lab, args.draws_scale, args.only, args.max_draws)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    classes_ok = all(f["least_power"] is None or f["least_power"] >= TARGET
                     for c in report.get("classes", []) for f in c["families"].values())
    return 0 if classes_ok and all(m["detection"] >= TARGET or _timing_only(m) for m in report["mutants"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
