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
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from . import CellSpec
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
    # eps <= 0.03 on the joint law of the first two tokens (issue 14): n = stats.n_for_eps at this alpha
    "T=1, k=2": (2, 1.0, None, None, 32700),
    # the knobs acting on both p and q: sized for grading time, each states its own eps
    "T=0.8, top-k=2, k=3": (3, 0.8, 2, None, 3000),
    "T=1.2, top-p=0.8, k=1": (1, 1.2, None, 0.8, 3000),
}
EPS_TARGET = 0.03  # for "T=1, k=2"


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
            for j in range(n):
                new, _ = fn(t, d, prompt, TOY_NEW, k, temperature=temp, top_k=top_k, top_p=top_p, generator=gen)
                new = [int(x) for x in new]
                if len(new) != TOY_NEW or not all(0 <= x < 4 for x in new):
                    raise AssertionError(f"[{name}] asked for {TOY_NEW} new tokens in a vocabulary of 4, got {new}")
                out[j] = 4 * new[0] + new[1]
            return out

        labels = [f"first two tokens {a}{b}" for a in range(4) for b in range(4)]
        cases.append(ExactnessCase(f"speculative_decode on the toy pair, {name}", _first_two_law(law, conts), n, draw,
                                   labels, guarantee="the joint law of the first two emitted tokens"))
    return cases


def check_sampling_contracts(speculative_decode: Callable) -> None:
    """Same generator seed, same tokens; global RNG states untouched; k < 1 raises ValueError."""
    from speclab.toy import toy_pair

    t, d = toy_pair(0)
    prompt = torch.tensor(TOY_PROMPT)

    def run(seed: int) -> list:
        gen = torch.Generator().manual_seed(seed)
        return [list(speculative_decode(t, d, prompt, 6, 2, temperature=1.0, generator=gen)[0]) for _ in range(20)]

    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    first, second = run(5), run(5)
    if not torch.equal(torch_state, torch.get_rng_state()):
        raise AssertionError("speculative_decode changed torch's global random state: every random number must come "
                             "from the generator argument (torch.multinomial(..., generator=generator), "
                             "torch.rand(..., generator=generator))")
    after = np.random.get_state()
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
    check_sampling_contracts(speculative_decode)
    cases = sampling_cases()
    rng = np.random.default_rng(seed)
    for case in tqdm(cases, desc="sampling exactness", disable=not GRADING, mininterval=10):
        check_case(case, speculative_decode, rng, ALPHA_CELL / len(cases))


# ------------------------------------------------------------------------------ part 3
def check_metrics(pooled_alpha: Callable, predicted_speedup: Callable) -> None:
    # k = 4: steps accepting 4 (4 verified), 0 (1 verified), 2 (3 verified): 6 accepted of 8 verified
    got = pooled_alpha([4, 0, 2], 4)
    assert abs(got - 6 / 8) < 1e-9, f"pooled alpha of accepted=[4, 0, 2] with k=4 should count every verified draft; got {got}"
    assert abs(pooled_alpha([1, 1, 1], 1) - 1.0) < 1e-9
    # alpha=0.5, k=2: E[N] = 1 + 0.5 + 0.25 = 1.75; cost 2/4 + 1.5 = 2 -> S = 0.875
    got = predicted_speedup(0.5, 2, 4.0, 1.5)
    assert abs(got - 0.875) < 1e-9, f"predicted_speedup(0.5, 2, c=4, c_verify=1.5) should be 0.875, got {got}"
    got = predicted_speedup(1.0, 3, 2.0, 1.0)
    assert abs(got - 4 / 2.5) < 1e-9, f"with alpha = 1 every step emits k + 1 tokens; got {got}"


def _cost_ratios(target, draft, ks) -> tuple[float, dict]:
    """c = T_target / T_draft (one token) and c_verify(k) = T_target(k + 1 tokens) / T_target(1), timed together."""
    from speclab.measure import forward_step_fns, time_interleaved

    tf = forward_step_fns(target, [1] + [k + 1 for k in ks], context_len=64)
    df = forward_step_fns(draft, [1], context_len=64)
    labels = ["draft T=1"] + [f"target T={t}" for t in tf]
    times = time_interleaved([df[1]] + list(tf.values()), labels, repeats=7, warmup=2, device=target.device, progress=False)
    t_draft, t_target = times[0].median, times[1].median
    # a forward over k + 1 tokens cannot cost less than one over 1 token; a ratio below 1 is timing noise
    verify = {k: max(1.0, times[2 + i].median / t_target) for i, k in enumerate(ks)}
    return t_target / t_draft, verify


def check_speedup(speculative_decode: Callable, autoregressive_decode: Callable) -> dict:
    """Best-k speedup over the course baseline, and measured >= THEORY_FRACTION * predicted."""
    from speclab.measure import time_interleaved
    from speclab.sampling import generate

    target, draft = shipped_pair()
    if target.device.type == "cpu":
        torch.set_num_threads(1)  # one thread, as in the book: stable ratios on a shared machine
    pr = prompts(1, length=32, seed=5)[0]
    n_new = 128
    fns = [lambda: generate(target, pr[None], n_new, temperature=0),
           lambda: autoregressive_decode(target, pr, n_new, temperature=0.0)]
    fns += [lambda k=k: speculative_decode(target, draft, pr, n_new, k, temperature=0.0) for k in K_GRID]
    labels = ["course baseline", "your baseline"] + [f"speculative k={k}" for k in K_GRID]
    times = time_interleaved(fns, labels, repeats=7, warmup=1, device=target.device, progress=False)
    base = times[0].median
    measured = {k: base / times[2 + i].median for i, k in enumerate(K_GRID)}
    best_k = max(measured, key=measured.get)
    required = SPEEDUP_CPU if target.device.type == "cpu" else SPEEDUP_CUDA
    table = ", ".join(f"k={k}: {s:.2f}x" for k, s in measured.items())
    assert measured[best_k] >= required, (f"speedup over the course's autoregressive baseline at the best k is "
                                          f"{measured[best_k]:.2f}x, below the required {required}x ({table})")
    # prediction from this run's own alpha and costs
    _, acc = speculative_decode(target, draft, pr, n_new, best_k, temperature=0.0)
    full = [a for a in acc[:-1]]  # the last step may be shortened by the length limit
    verified = sum(min(a + 1, best_k) for a in full)
    alpha = sum(full) / verified
    c, verify = _cost_ratios(target, draft, [best_k])
    tokens = (1 - alpha ** (best_k + 1)) / (1 - alpha) if alpha < 1 else best_k + 1
    predicted = tokens / (best_k / c + verify[best_k])
    assert measured[best_k] >= THEORY_FRACTION * predicted, (
        f"measured speedup {measured[best_k]:.2f}x at k={best_k} is below {THEORY_FRACTION} x the predicted "
        f"{predicted:.2f}x (alpha={alpha:.3f}, c={c:.2f}, c_verify={verify[best_k]:.2f}): your loop has overhead the model does not")
    return {"measured": measured, "best_k": best_k, "alpha": alpha, "c": c, "c_verify": verify[best_k],
            "predicted": predicted}


# ------------------------------------------------------------------------------ part 4
def check_decode_bytes(decode_bytes: Callable) -> None:
    from speclab.measure import decode_step_bytes
    from speclab.model import GPTConfig, PRESETS

    cfgs = [PRESETS["target"], PRESETS["draft"], GPTConfig(n_layer=3, n_head=2, d_model=64, vocab_size=100, mlp_ratio=2)]
    for cfg in cfgs:
        for L in (0, 1, 100, 511):
            want = decode_step_bytes(cfg, L).total
            got = decode_bytes(cfg, L)
            assert got == want, f"decode_bytes for n_layer={cfg.n_layer}, d_model={cfg.d_model}, context {L}: got {got}, expected {want} (off by {got - want})"


def check_bandwidth(copy_bandwidth: Callable) -> None:
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
    "test_speedup": f"timing: fails only if the best-k speedup is < {SPEEDUP_CPU}x (CPU) or measured < "
                    f"{THEORY_FRACTION} x predicted",
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
