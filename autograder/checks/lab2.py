"""Hidden checks of Lab 2 (a speculative decoder with KV rollback), one function per graded cell.

Notation: see the `speclab` package docstring.

Deterministic checks (greedy equivalence, rollback, byte counts) have no false
failures: a correct decoder reproduces the target's greedy tokens and the caches
of a fresh prefill (up to float rounding, tolerance ATOL). The sampling check is a
total-variation exactness test (autograder.checks.stats) on the toy pair of
speclab.toy, whose continuation law is enumerated: false-failure probability
<= ALPHA_CELL for any seed, and power >= 0.999 against every decoder whose first
two tokens' joint law is at total variation >= eps (<= EPS_TARGET for "T=1, k=2"). Timing checks run in the grading run itself:
medians of interleaved repeats after warm-up, the course's own baseline
(speclab.sampling.generate) timed alongside the student's decoder.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from . import CellSpec, defer_to_grader
from .alone import alone
from .calls import call_each
from .stats import ExactnessCase, check_case

ALPHA_CELL = 1e-6  # false-failure budget of the statistical test cell
ATOL = 1e-4  # cache entries: incremental vs fresh prefill (float32 rounding is ~1e-6)
SPEEDUP_CPU = 1.3  # best-k speedup over the course baseline required on a CPU (issue 6)
SPEEDUP_CUDA = 1.0  # on a GPU the shipped pair is tiny and launch-bound: must not be slower (documented)
THEORY_FRACTION = 0.75  # measured S >= 0.75 * the S predicted from the run's own alpha and c
K_GRID = (3, 4, 6)  # draft lengths timed for "the best k"
GRADING = os.environ.get("NBGRADER_EXECUTION") is not None

_PAIR = {}


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def shipped_pair():
    """(target, draft) on the grading device, loaded once per kernel."""
    if "pair" not in _PAIR:
        from speclab.checkpoints import load_pair

        # float32 on every device: greedy equivalence compares argmaxes of a (k+1)-token verify with
        # one-token steps, and half precision can flip near-ties between the two
        _PAIR["pair"] = load_pair(device=device(), dtype=torch.float32)
    return _PAIR["pair"]


def prompts(n: int, length: int = 24, seed: int = 3) -> list[torch.Tensor]:
    from speclab.data import heldout_windows

    return [w.to(device()) for w in heldout_windows(n, length, seed=seed)]


def greedy_reference(target, prompt: torch.Tensor, n_new: int) -> list[int]:
    from speclab.sampling import generate

    return generate(target, prompt[None], n_new, temperature=0)[0, prompt.numel():].tolist()


def _first_diff(a: list, b: list) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


# ------------------------------------------------------------------------------ part 1
def check_baseline(prefill: Callable, autoregressive_decode: Callable) -> None:
    """prefill fills the cache and returns the next-token logits; greedy decoding matches the target's."""
    target, _ = shipped_pair()
    for pr in prompts(3):
        cache = target.new_cache(batch=1, max_len=64)
        logits = prefill(target, pr, cache)
        want = target.reference_forward(pr[None])[0, -1]
        assert cache.length == pr.numel(), f"after prefill the cache holds {cache.length} positions, not {pr.numel()}"
        err = float((logits.float() - want).abs().max())
        assert err < 1e-3, f"prefill's logits differ from a cache-free forward by up to {err:.3g}"
        got = list(autoregressive_decode(target, pr, 40, temperature=0.0))
        ref = greedy_reference(target, pr, 40)
        assert got == ref, (f"greedy autoregressive decoding differs from the target's greedy tokens "
                            f"from new token {_first_diff(got, ref)} on")


# ------------------------------------------------------------------------------ part 2
def check_greedy_equivalence(speculative_decode: Callable) -> None:
    """Greedy speculative decoding emits the target's greedy tokens for every k, and stops at eos."""
    target, draft = shipped_pair()
    n_new = 24 if GRADING else 48
    for i, pr in enumerate(prompts(4)):
        ref = greedy_reference(target, pr, n_new)
        for k in (1, 2, 4, 8):
            got, _ = speculative_decode(target, draft, pr, n_new, k, temperature=0.0)
            assert list(got) == ref, (f"prompt {i}, k={k}: speculative output differs from greedy target output "
                                      f"from new token {_first_diff(list(got), ref)} on (lengths {len(got)}, {len(ref)})")
        # an end token inside a block: output stops right after its first occurrence
        eos = ref[n_new // 2]
        got, _ = speculative_decode(target, draft, pr, n_new, 4, temperature=0.0, eos=eos)
        want = ref[: ref.index(eos) + 1]
        assert list(got) == want, f"prompt {i}: with end token {eos} the output should stop after it (length {len(want)}), got length {len(got)}"


def _cache_checker(target, draft, log: list) -> Callable:
    """on_step callback: both caches must equal a fresh prefill of all emitted tokens but the last."""

    def on_step(tc, dc, seq) -> None:
        seq = [int(t) for t in seq]
        want_len = len(seq) - 1
        for name, model, cache in (("target", target, tc), ("draft", draft, dc)):
            assert cache.length == want_len, (f"after step {len(log) + 1} the {name} cache holds {cache.length} "
                                              f"positions; it should hold {want_len} (every token but the last emitted)")
            fresh = model.new_cache(batch=1, max_len=max(want_len, 1))
            if want_len:
                model(torch.tensor([seq[:want_len]], device=model.device), torch.arange(want_len, device=model.device), fresh)
            for layer in range(cache.n_layer):
                for kind, a, b in (("K", cache.k[layer], fresh.k[layer]), ("V", cache.v[layer], fresh.v[layer])):
                    err = float((a[:, :, :want_len].float() - b[:, :, :want_len].float()).abs().max()) if want_len else 0.0
                    assert err < ATOL, (f"after step {len(log) + 1} the {name} cache's {kind} of layer {layer} "
                                        f"differs from a fresh prefill of the emitted tokens by {err:.3g}")
        log.append(len(seq))

    return on_step


def check_rollback(speculative_decode: Callable) -> None:
    """After every step both KV caches equal a fresh prefill of the emitted tokens (rollback is exact)."""
    from speclab.toy import toy_pair

    t, d = toy_pair(0)
    gen = torch.Generator().manual_seed(1)
    # sampled runs on the toy pair: rejections at the first position and full acceptances both occur
    seen_zero = seen_full = False
    for k in (1, 2, 3):
        for trial in range(4):
            log: list = []
            new, acc = speculative_decode(t, d, torch.tensor([0, 1, 2]), 12, k, temperature=1.0,
                                          generator=gen, on_step=_cache_checker(t, d, log))
            assert len(new) == 12, f"k={k}: asked for 12 new tokens (the caches' capacity), got {len(new)}"
            assert log, "on_step was never called"
            seen_zero |= 0 in acc
            seen_full |= k in acc
    assert seen_zero and seen_full, "the rollback runs did not cover a rejection at the first position and a full acceptance"
    # the draft IS the target: every draft is accepted at temperature 0 (the draft cache must catch up)
    log = []
    new, acc = speculative_decode(t, t, torch.tensor([3, 1]), 13, 3, temperature=0.0, on_step=_cache_checker(t, t, log))
    assert all(a == min(3, 13 - 1 - sum(acc[:i]) - i) or a == 3 for i, a in enumerate(acc)), f"draft == target should accept everything, got accepted={acc}"
    # an end token inside an accepted block, with the shipped pair
    target, draft = shipped_pair()
    pr = prompts(1)[0]
    ref = greedy_reference(target, pr, 20)
    eos = ref[7]
    log = []
    new, _ = speculative_decode(target, draft, pr, 20, 4, temperature=0.0, eos=eos, on_step=_cache_checker(target, draft, log))
    assert list(new) == ref[: ref.index(eos) + 1], "with an end token the output must stop right after it"


# ------------------------------------------------------------------------------ sampling
TOY_PROMPT = [0, 1]
TOY_NEW = 3  # tokens asked for; the outcome tested is the pair of the first two (a k = 2 block spans both)
SAMPLING_SETTINGS = {  # name -> (k, temperature, top_k, top_p, n)
    # eps <= 0.03 on the joint law of the first two tokens (issue 14): n = stats.n_for_eps at this alpha, with
    # the early looks of stats.early_passes (a correct decoder usually passes at 0.3 n to 0.55 n)
    "T=1, k=2": (2, 1.0, None, None, 33300),
    # the knobs acting on both p and q: sized for grading time, each states its own eps
    "T=0.8, top-k=2, k=3": (3, 0.8, 2, None, 3000),
    "T=1.2, top-p=0.8, k=1": (1, 1.2, None, 0.8, 3000),
}
EPS_TARGET = 0.03  # for TARGETED
TARGETED = "T=1, k=2"


def _first_two_law(law: np.ndarray, conts: list) -> np.ndarray:
    """Law of (first token, second token), index 4 * first + second, from the law of whole continuations."""
    out = np.zeros(16)
    for prob, c in zip(law, conts):
        out[4 * c[0] + c[1]] += prob
    return out


def sampling_cases() -> list[ExactnessCase]:
    from speclab.toy import sequence_law, toy_pair

    t, d = toy_pair(0)
    cases = []
    for name, (k, temp, top_k, top_p, n) in SAMPLING_SETTINGS.items():
        law, conts = sequence_law(t, TOY_PROMPT, TOY_NEW, temp, top_k, top_p)

        def draw(fn, rng, n, k=k, temp=temp, top_k=top_k, top_p=top_p, name=name):
            gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
            prompt = torch.tensor(TOY_PROMPT)
            out = np.empty(n, dtype=np.int64)
            results = call_each(fn, [(t, d, prompt, TOY_NEW, k)] * n, temperature=temp, top_k=top_k, top_p=top_p,
                                generator=gen)
            for j, result in enumerate(results):
                new, _ = result
                new = [int(x) for x in new]
                if len(new) != TOY_NEW or not all(0 <= x < 4 for x in new):
                    raise AssertionError(f"[{name}] asked for {TOY_NEW} new tokens in a vocabulary of 4, got {new}")
                out[j] = 4 * new[0] + new[1]
            return out

        labels = [f"first two tokens {a}{b}" for a in range(4) for b in range(4)]
        # the targeted case passes early once clearly within its target (stats.early_passes); the two sized
        # for time are too small for an early look to pass and keep one look
        cases.append(ExactnessCase(f"speculative_decode on the toy pair, {name}", _first_two_law(law, conts), n, draw,
                                   labels, guarantee="the joint law of the first two emitted tokens",
                                   eps=EPS_TARGET if name == TARGETED else None))
    return cases


check_rollback.in_grader = False  # passes the student an on_step callback: judged inside the notebook


def check_sampling_contracts(speculative_decode: Callable) -> None:
    """Same generator seed, same tokens; global RNG states untouched; k < 1 raises ValueError."""
    from speclab.toy import toy_pair

    t, d = toy_pair(0)
    prompt = torch.tensor(TOY_PROMPT)

    def run(seed: int) -> list:
        gen = torch.Generator().manual_seed(seed)
        return [list(out[0]) for out in call_each(speculative_decode, [(t, d, prompt, 6, 2)] * 20, temperature=1.0,
                                                   generator=gen)]

    with alone():  # no other check of the grader's process may move the global states meanwhile
        torch_state, np_state = torch.get_rng_state(), np.random.get_state()
        first, second = run(5), run(5)
        torch_after, after = torch.get_rng_state(), np.random.get_state()
    if not torch.equal(torch_state, torch_after):
        raise AssertionError("speculative_decode changed torch's global random state: every random number must come "
                             "from the generator argument (torch.multinomial(..., generator=generator), "
                             "torch.rand(..., generator=generator))")
    if not (np_state[0] == after[0] and np.array_equal(np_state[1], after[1]) and np_state[2:] == after[2:]):
        raise AssertionError("speculative_decode changed numpy's global random state: every random number must come "
                             "from the generator argument")
    if first != second:
        raise AssertionError(f"two runs with generators seeded alike gave different tokens ({first[:2]}... and "
                             f"{second[:2]}...): every random number must come from the generator argument")
    for what, call in {
        "k = 0": lambda: speculative_decode(t, d, prompt, 4, 0, temperature=1.0),
        "k = -1": lambda: speculative_decode(t, d, prompt, 4, -1, temperature=1.0),
    }.items():
        try:
            got = call()
        except ValueError:
            continue
        except Exception as err:  # noqa: BLE001 - the contract asks for ValueError
            raise AssertionError(f"speculative_decode with {what}: expected a ValueError, got "
                                 f"{type(err).__name__}: {err}") from None
        raise AssertionError(f"speculative_decode with {what}: expected a ValueError, nothing was raised "
                             f"(you returned {got!r})")


def check_sampling_exactness(speculative_decode: Callable, seed: int = 2026) -> None:
    """Sampled speculative decoding follows the target's law on the toy pair (distance test with a stated eps)."""
    check_sampling_contracts(speculative_decode)
    cases = sampling_cases()
    rng = np.random.default_rng(seed)
    # progress on stdout: nbgrader scores a test cell that wrote to stderr as failed
    for case in tqdm(cases, desc="sampling exactness", disable=not GRADING, mininterval=10, file=sys.stdout):
        check_case(case, speculative_decode, rng, ALPHA_CELL / len(cases))


# ------------------------------------------------------------------------------ part 3
def check_metrics(pooled_alpha: Callable, predicted_speedup: Callable) -> None:
    """pooled_alpha counts every verified draft; predicted_speedup follows the book's formula."""
    # k = 4: steps accepting 4 (4 verified), 0 (1 verified), 2 (3 verified): 6 accepted of 8 verified
    got = pooled_alpha([4, 0, 2], 4)
    assert abs(got - 6 / 8) < 1e-9, f"pooled alpha of accepted=[4, 0, 2] with k=4 should count every verified draft; got {got}"
    assert abs(pooled_alpha([1, 1, 1], 1) - 1.0) < 1e-9
    # alpha=0.5, k=2: E[N] = 1 + 0.5 + 0.25 = 1.75; cost 2/4 + 1.5 = 2 -> S = 0.875
    got = predicted_speedup(0.5, 2, 4.0, 1.5)
    assert abs(got - 0.875) < 1e-9, f"predicted_speedup(0.5, 2, c=4, c_verify=1.5) should be 0.875, got {got}"
    got = predicted_speedup(1.0, 3, 2.0, 1.0)
    assert abs(got - 4 / 2.5) < 1e-9, f"with alpha = 1 every step emits k + 1 tokens; got {got}"


TIMING_BUDGET_S = 45.0  # seconds of timed rounds after which no new look starts (the lock wait comes on top)
TIMING_HARD_LIMIT_S = 150.0  # never time longer; the lab's cell limit (autograder.course) leaves room for
# this, the wait for the graders' lock (timing.LOCK_WAIT_S) and loading the pair
N_NEW = 128  # tokens generated per timed call
VERIFY_CALLS = 16  # forwards per timed call when measuring c_verify(k)


def _predicted(alpha: float, k: int, c: float, c_verify: float) -> float:
    """The lab's cost model with the draft's catch-up: S = E[N] / ((k + alpha^k) / c + c_verify(k)).

    A step drafts k tokens (k draft forwards) and verifies them in one target forward over k + 1
    positions; when all k are accepted (probability alpha^k) the draft has not seen its own last
    token and is fed it once more, so a step costs k + alpha^k draft forwards on average."""
    from speclab import theory

    tokens = theory.expected_tokens(alpha, k)
    return float(tokens / ((k + alpha**k) / c + c_verify))


def check_speedup(speculative_decode: Callable, autoregressive_decode: Callable) -> dict:
    """Best-k speedup over the course baseline, and measured >= THEORY_FRACTION * predicted.

    Timed under the graders' lock in paired rounds (autograder.checks.timing): each round runs
    the course baseline (greedy generate with the target), the same with the draft (their ratio
    is this round's c), the student's decoder at every k of K_GRID, and loops of target forwards
    over 1 and k + 1 tokens (this round's c_verify(k)). Per round and k: the speedup (baseline time /
    decoder time) and its ratio to the prediction from the run's alpha and that round's costs.
    A clause fails only on a clear verdict of the sequential sign test, for every k: false-failure
    probability <= timing.ALPHA_CLAUSE (1.23 %) per clause, <= 2.5 % for the cell, for a decoder whose
    per-round ratios at some k have a median at or above the bar (5 % with the pipeline's re-check).
    """
    from speclab.measure import forward_step_fns
    from speclab.sampling import generate

    from . import timing

    target, draft = shipped_pair()
    if target.device.type == "cpu":
        torch.set_num_threads(1)  # one thread, as in the book: stable ratios on a shared machine
    pr = prompts(1, length=32, seed=5)[0]
    required = SPEEDUP_CPU if target.device.type == "cpu" else SPEEDUP_CUDA
    # alpha of each k from one untimed greedy run (deterministic); the last step may be cut short
    alphas = {}
    for k in K_GRID:
        _, acc = speculative_decode(target, draft, pr, N_NEW, k, temperature=0.0)
        full = list(acc[:-1]) or list(acc)
        verified = sum(min(a + 1, k) for a in full)
        alphas[k] = sum(full) / verified if verified else 0.0
    # Costs from long operations only: a single forward of a few milliseconds is at the mercy of the
    # scheduler on a loaded machine (its median drifts, not just its spread), a whole decode is not.
    # c = T_target / T_draft from the same greedy generate run with each model; c_verify(k) from
    # VERIFY_CALLS cached forwards over k + 1 tokens against as many over 1 token.
    tf = forward_step_fns(target, [1] + [k + 1 for k in K_GRID], context_len=64)

    def loop(fn):
        def run():
            for _ in range(VERIFY_CALLS):
                fn()
        return run

    fns = [lambda: generate(target, pr[None], N_NEW, temperature=0),
           lambda: generate(draft, pr[None], N_NEW, temperature=0)]
    fns += [lambda k=k: speculative_decode(target, draft, pr, N_NEW, k, temperature=0.0) for k in K_GRID]
    fns += [loop(f) for f in tf.values()]
    labels = ["baseline", "draft baseline"] + [f"k={k}" for k in K_GRID] + [f"target T={t}" for t in tf]

    def per_round(rounds: timing.Rounds) -> tuple[dict, dict]:
        speed = {k: rounds.ratios("baseline", f"k={k}") for k in K_GRID}
        c = rounds.ratios("baseline", "draft baseline")
        theory_ratio = {}
        for k in K_GRID:
            v = [max(1.0, x) for x in rounds.ratios(f"target T={k + 1}", "target T=1")]  # < 1 is noise
            theory_ratio[k] = [s / _predicted(alphas[k], k, ci, vi) for s, ci, vi in zip(speed[k], c, v)]
        return speed, theory_ratio

    def verdicts(rounds: timing.Rounds) -> tuple[str, str]:
        speed, theory_ratio = per_round(rounds)
        one = [timing.verdict(speed[k], required) for k in K_GRID]
        two = [timing.verdict(theory_ratio[k], THEORY_FRACTION) for k in K_GRID]

        def combine(vs):  # pass if some k passes clearly, fail only if every k fails clearly
            return "pass" if "pass" in vs else "fail" if all(v == "fail" for v in vs) else "inconclusive"

        return combine(one), combine(two)

    rounds = timing.sequential_rounds(fns, labels, lambda r: "inconclusive" not in verdicts(r),
                                      TIMING_BUDGET_S, target.device, hard_limit_s=TIMING_HARD_LIMIT_S)
    speed, theory_ratio = per_round(rounds)
    first, second = verdicts(rounds)
    measured = {k: timing.median(speed[k]) for k in K_GRID}
    best_k = max(measured, key=measured.get)
    c = timing.median(rounds.ratios("baseline", "draft baseline"))
    v_best = max(1.0, timing.median(rounds.ratios(f"target T={best_k + 1}", "target T=1")))
    predicted = _predicted(alphas[best_k], best_k, c, v_best)
    table = ", ".join(f"k={k}: {s:.2f}x" for k, s in measured.items())
    n = len(rounds.times)
    how = (f"{n} paired rounds; a clear verdict of a sign test, false-failure probability <= "
           f"{timing.ALPHA_CLAUSE:.0%}" + (f"; {rounds.lock_note}" if rounds.lock_note else ""))
    if first == "fail":
        raise timing.TimingFailure(
            f"speedup over the course's autoregressive baseline is clearly below the required {required}x at every k "
            f"(median per k: {table}; {how})")
    if second == "fail":
        raise timing.TimingFailure(
            f"measured speedup is clearly below {THEORY_FRACTION} x the predicted one at every k (at k={best_k}: "
            f"{measured[best_k]:.2f}x against {predicted:.2f}x, alpha={alphas[best_k]:.3f}, c={c:.2f}, "
            f"c_verify={v_best:.2f}; {how}): your loop has overhead the model does not")
    if "inconclusive" in (first, second):
        print(f"timing inconclusive after {n} rounds (median per k: {table}); no points are taken for a timing "
              f"that is not clear")
    return {"measured": measured, "best_k": best_k, "alpha": alphas[best_k], "c": c, "c_verify": v_best,
            "predicted": predicted, "rounds": n, "verdicts": (first, second),
            "theory_ratio": {k: timing.median(r) for k, r in theory_ratio.items()}}


# ------------------------------------------------------------------------------ part 4
def check_decode_bytes(decode_bytes: Callable) -> None:
    """decode_bytes counts the least bytes one decode step moves (weights, K and V read and written)."""
    from speclab.measure import decode_step_bytes
    from speclab.model import GPTConfig, PRESETS

    cfgs = [PRESETS["target"], PRESETS["draft"], GPTConfig(n_layer=3, n_head=2, d_model=64, vocab_size=100, mlp_ratio=2)]
    for cfg in cfgs:
        for L in (0, 1, 100, 511):
            want = decode_step_bytes(cfg, L).total
            got = decode_bytes(cfg, L)
            assert got == want, f"decode_bytes for n_layer={cfg.n_layer}, d_model={cfg.d_model}, context {L}: got {got}, expected {want} (off by {got - want})"


def check_bandwidth(copy_bandwidth: Callable) -> None:
    """copy_bandwidth is within a factor of 3 of the course's own copy measurement."""
    from speclab.measure import copy_bandwidth as course_copy

    n_bytes = 64 * 2**20
    ours = course_copy(n_bytes, device=device()).bytes_per_s
    theirs = float(copy_bandwidth(n_bytes))
    assert 0.33 * ours <= theirs <= 3.0 * ours, (f"your copy bandwidth {theirs / 1e9:.2f} GB/s is not within a factor of 3 "
                                                 f"of torch's own copy measured now ({ours / 1e9:.2f} GB/s)")


check_speedup.randomised = True  # a timing: its verdict on a slow decoder depends on the machine's load
check_bandwidth.randomised = True


# ------------------------------------------------------------------------------ registry
# Why the cells without statistical cases cannot fail a correct implementation.
DETERMINISTIC_NOTES = {
    "test_baseline": f"0 up to float rounding: logits compared with a fresh forward (tolerance {ATOL}), greedy tokens",
    "test_greedy": "0: greedy tokens compared with the course's greedy generate, no randomness",
    "test_rollback": f"0 up to float rounding: caches compared with a fresh prefill (tolerance {ATOL})",
    "test_metrics": "0: values worked by hand, tolerance 1e-9, no randomness",
    "test_speedup": f"timing, paired rounds under the graders' lock: fails only on a clear sign-test verdict that "
                    f"the speedup is < {SPEEDUP_CPU}x (CPU) or measured < {THEORY_FRACTION} x predicted at every k; "
                    f"false-failure probability <= 2.5 % per timed run (1.25 % per clause), <= 5 % with the re-check",
    "test_bytes": "0: exact integer byte counts",
    "test_bandwidth": "timing: fails only if the copy bandwidth is off by more than 3x from torch's own copy",
}

CELLS: list[CellSpec] = [
    CellSpec("test_baseline", 1, 2, check_baseline, ("prefill", "autoregressive_decode")),
    CellSpec("test_greedy", 2, 4, check_greedy_equivalence, ("speculative_decode",)),
    CellSpec("test_rollback", 2, 4, check_rollback, ("speculative_decode",)),
    CellSpec("test_sampling", 2, 4, check_sampling_exactness, ("speculative_decode",), sampling_cases, 2026),
    CellSpec("test_metrics", 3, 2, check_metrics, ("pooled_alpha", "predicted_speedup")),
    CellSpec("test_speedup", 3, 4, check_speedup, ("speculative_decode", "autoregressive_decode")),
    CellSpec("test_bytes", 4, 2, check_decode_bytes, ("decode_bytes",)),
    CellSpec("test_bandwidth", 4, 1, check_bandwidth, ("copy_bandwidth",)),
]

defer_to_grader(globals())  # the grading pipeline's nbgrader run leaves these checks to the grader
