"""Write the nbgrader source notebook of Lab 2: `python -m autograder.build_lab2`, then `make labs`.

The solution cells come from autograder/lab2_solution.py, the hidden tests call
autograder.checks.lab2, and the points of each graded cell are in CELLS below.

Notation: p = target distribution, q = draft distribution, k = draft length,
alpha = acceptance rate, c = T_target / T_draft, S = speedup.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import lab2_solution as S
from autograder.build_lab1 import code, md, set_stable_ids, sol
from speclab.model import PRESETS

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "solutions" / "lab2" / "lab2.ipynb"
BOOK = "../../book"


@dataclass(frozen=True)
class Cell:
    grade_id: str
    part: int
    points: int
    call: str  # the hidden check call, in the notebook's names


CELLS = [
    Cell("test_baseline", 1, 2, "_checks.check_baseline(prefill, autoregressive_decode)"),
    Cell("test_greedy", 2, 4, "_checks.check_greedy_equivalence(speculative_decode)"),
    Cell("test_rollback", 2, 4, "_checks.check_rollback(speculative_decode)"),
    Cell("test_sampling", 2, 4, "_checks.check_sampling_exactness(speculative_decode)"),
    Cell("test_metrics", 3, 2, "_checks.check_metrics(pooled_alpha, predicted_speedup)"),
    Cell("test_speedup", 3, 4, "_checks.check_speedup(speculative_decode, autoregressive_decode)"),
    Cell("test_bytes", 4, 2, "_checks.check_decode_bytes(decode_bytes)"),
    Cell("test_bandwidth", 4, 1, "_checks.check_bandwidth(copy_bandwidth)"),
]
SPEC = {c.grade_id: c for c in CELLS}


def test(grade_id: str, visible: str) -> nbformat.NotebookNode:
    spec = SPEC[grade_id]
    hidden = f"### BEGIN HIDDEN TESTS\nfrom autograder.checks import lab2 as _checks\n{spec.call}\n### END HIDDEN TESTS"
    cell = nbformat.v4.new_code_cell(f"# {spec.points} point(s)\n{visible.strip()}\n{hidden}")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": spec.points,
                                 "grade_id": grade_id, "schema_version": 3}
    return cell


def cells() -> list:
    return [
        md("intro", f"""
# Lab 2: a speculative decoder with KV rollback

You build a real speculative decoder on the course's shipped model pair (a {PRESETS['target'].n_layer}-block byte-level
target and a {PRESETS['draft'].n_layer}-block draft), show that it is exact, make it faster than plain decoding, and
measure where the time goes.

Notation (as in the book): **p** is the target distribution, **q** the draft distribution,
**k** the draft length, **α** the acceptance rate, **c** = T_target / T_draft, **N** the tokens
emitted per step, **S** the speedup.

Background: [Tokens per step]({BOOK}/05_tokens_per_step.md), [Speedup]({BOOK}/06_speedup.md),
[Real machines]({BOOK}/07_machines.md) and [Memory-bound decoding]({BOOK}/01_memory_bound.md).

| Part | What you write | Points |
|---|---|---|
| 1 | `prefill`, `autoregressive_decode` (the baseline) | 2 |
| 2 | `speculative_decode`: greedy-exact, sampling-exact, both caches rolled back | 12 |
| 3 | `pooled_alpha`, `predicted_speedup`; your decoder's speedup is timed by the grader | 6 |
| 4 | `decode_bytes`, `copy_bandwidth` | 3 |
| 5 | choosing k (ungraded: the sweep and plot below) | 0 |

The notebook runs on a CUDA GPU when there is one and on the CPU otherwise (`DEVICE` is picked
once). When the grader runs it, `NBGRADER_EXECUTION` is set and the long sweeps shrink. The
grader times your decoder itself in the same run as the course's own baseline; numbers you print
are for you, not for the grade.
"""),
        code(S.SETUP, "setup", locked=True),
        code("""
from speclab.checkpoints import load_pair
from speclab.data import encode, decode, heldout_windows

target, draft = load_pair(device=DEVICE, dtype=torch.float32)  # float32 everywhere: greedy ties stay ties
print(f"device {DEVICE}; target {target.num_params():,} parameters, draft {draft.num_params():,}")
""", "load", locked=True),
        md("part1", """
## Part 1: prefill and the autoregressive baseline (2 points)

The model API: `cache = model.new_cache(batch=1, max_len=n)` pre-allocates keys and values;
`model(tokens [B, T], positions [T], cache)` reads the `cache.length` valid slots, writes T new
ones and returns logits `[B, T, V]`; `positions` must be `cache.length + arange(T)`.
`cache.rollback(n)` forgets every position `>= n` in O(1).

`prefill` runs the whole prompt in one forward and returns the logits of the next token.
`autoregressive_decode` then emits one token per cached forward, drawing each from
`process_logits(logits, temperature, top_k, top_p)` with `torch.multinomial(..., generator=generator)`
(temperature 0 is greedy), and stops after `max_new_tokens` tokens or right after `eos`.
This is the baseline every speedup in this lab is measured against.
"""),
        sol("impl_part1", S.PART1),
        test("test_baseline", """
_p = encode("def main():\\n    ").to(DEVICE)
_c = target.new_cache(batch=1, max_len=32)
assert torch.allclose(prefill(target, _p, _c), target.reference_forward(_p[None])[0, -1], atol=1e-3)
assert _c.length == _p.numel()
print(repr(decode(autoregressive_decode(target, _p, 40))))
"""),
        md("part2", f"""
## Part 2: the speculative decoding loop (12 points)

One step, with `seq` the tokens so far and both caches holding `len(seq) - 1` positions
(every token but the last, which the step feeds):

1. **Draft** k tokens with the draft's cache, one cached forward each: feed the last token, take
   q = `process_logits(...)`, sample $x_i \\sim q$, feed $x_i$, and so on. Keep every q row.
2. **Verify** with **one** target forward over k + 1 positions: `[seq[-1], x_1, ..., x_k]`. Row $i$ of
   its output is p at the position of $x_{{i+1}}$; the last row is p after all k drafts.
3. **Accept/reject** left to right with the Lab 1 rule: accept $x_i$ with probability
   $\\min(1, p(x_i)/q(x_i))$; at the first rejection emit a token from the residual
   $\\max(p - q, 0)$ normalised, and stop; if all k are accepted, emit a **bonus** token from the last row of p.
4. **Roll back** both caches to `len(seq) - 1` for the new `seq`. The target wrote k + 1 positions
   and the draft k, so both only ever shrink, except when all k drafts are accepted: then the draft
   never saw $x_k$ and must be fed it (it *catches up*) before the next step.

The same `process_logits` settings must shape p and q: the acceptance test is only exact for the
distributions the tokens were actually drawn from ([Exactness]({BOOK}/03_exactness.md)). Near the
end, draft only `min(k, remaining - 1)` tokens so the step never emits past `max_new_tokens`; stop
right after `eos` if it is emitted, even inside an accepted block. Call `on_step(target_cache,
draft_cache, seq)` after each step: the grader uses it to compare your caches with a fresh prefill.
"""),
        sol("impl_part2", S.PART2),
        test("test_greedy", """
_p = encode("import os\\n").to(DEVICE)
_ref = autoregressive_decode(target, _p, 30)
for _k in (1, 2, 4):
    _out, _acc = speculative_decode(target, draft, _p, 30, _k)
    assert list(_out) == _ref, f"k={_k}: greedy speculative output differs from greedy decoding"
print("greedy speculative decoding matches the target for k = 1, 2, 4")
"""),
        test("test_rollback", """
def _check_lengths(tc, dc, seq):
    assert tc.length == dc.length == len(seq) - 1, (tc.length, dc.length, len(seq))

speculative_decode(target, draft, encode("class A:").to(DEVICE), 20, 3, on_step=_check_lengths)
speculative_decode(target, target, encode("x = 1").to(DEVICE), 20, 3, on_step=_check_lengths)  # all accepted
print("cache lengths follow the emitted sequence")
"""),
        test("test_sampling", """
from speclab.toy import toy_pair
_t, _d = toy_pair(0)
_g = torch.Generator().manual_seed(0)
_firsts = [speculative_decode(_t, _d, torch.tensor([0, 1]), 1, 2, temperature=1.0, generator=_g)[0][0] for _ in range(400)]
_p1 = process_logits(_t(torch.tensor([[0, 1]]))[0, -1], 1.0).detach().numpy()
print("first-token frequencies", np.bincount(_firsts, minlength=4) / 400, "target p", _p1.round(3))
"""),
        md("part3", f"""
## Part 3: α, c and predicted versus measured speedup (6 points)

From your own runs: the pooled α counts every *verified* draft token. A step that accepted $a < k$
drafts verified $a + 1$ of them (it stopped at the rejection); a step that accepted all $k$ verified $k$.
With $E[N] = (1 - α^{{k+1}})/(1 - α)$ tokens per step ([Tokens per step]({BOOK}/05_tokens_per_step.md)),
a step costing $k$ draft forwards and one target forward over $k+1$ positions, in units of one
target decode step, costs $k/c + c_{{verify}}(k)$, where $c_{{verify}}(k)$ = T_target(k+1 tokens) / T_target(1 token).
So $S = E[N] / (k/c + c_{{verify}}(k))$ ([Speedup]({BOOK}/06_speedup.md), [Real machines]({BOOK}/07_machines.md)).
The grader times your decoder at several k against the course's baseline: on a CPU the best k must
reach {1.3}× and the measured speedup must be at least 0.75 × the S predicted from that run's α and c.
"""),
        sol("impl_part3", S.PART3),
        test("test_metrics", """
assert abs(pooled_alpha([2, 2], 2) - 1.0) < 1e-12
assert abs(predicted_speedup(0.0, 1, 10.0, 1.0) - 1 / 1.1) < 1e-12
"""),
        code("""
from speclab.measure import forward_times, time_interleaved

KS = (1, 2, 4, 6) if GRADING else (1, 2, 3, 4, 5, 6, 8)
N_NEW = 48 if GRADING else 128
prompt = heldout_windows(1, 32, seed=7)[0].to(DEVICE)
ft = forward_times(target, [1] + [k + 1 for k in KS], context_len=64, repeats=5)
fd = forward_times(draft, [1], context_len=64, repeats=5)
c = ft[1].median / fd[1].median
c_verify = {k: max(1.0, ft[k + 1].median / ft[1].median) for k in KS}  # below 1 is timing noise
fns = [lambda: autoregressive_decode(target, prompt, N_NEW)]
fns += [lambda k=k: speculative_decode(target, draft, prompt, N_NEW, k) for k in KS]
times = time_interleaved(fns, repeats=3 if GRADING else 5, warmup=1, device=DEVICE)
rows = []
for i, k in enumerate(KS):
    _, acc = speculative_decode(target, draft, prompt, N_NEW, k)
    a = pooled_alpha(acc[:-1] or acc, k)
    rows.append((k, a, c_verify[k], predicted_speedup(a, k, c, c_verify[k]), times[0].median / times[1 + i].median))
print(f"c = {c:.2f} on {DEVICE}")
print(" k  alpha  c_verify  predicted S  measured S")
for k, a, v, s_pred, s_meas in rows:
    print(f"{k:2d}  {a:.3f}  {v:8.2f}  {s_pred:11.2f}  {s_meas:10.2f}")
plt.figure(figsize=(5, 3.2))
plt.plot(KS, [r[3] for r in rows], "o-", label="predicted from α, c, c_verify")
plt.plot(KS, [r[4] for r in rows], "s-", label="measured")
plt.axhline(1, color="gray", lw=0.8)
plt.xlabel("draft length k"); plt.ylabel("speedup S"); plt.legend(); plt.title(f"greedy, {DEVICE.type}")
plt.show()
""", "sweep", locked=False),
        test("test_speedup", """
print("the grader times speculative_decode against the course baseline here")
"""),
        md("part5", f"""
## Part 5: choosing k

With α and c from the sweep above, the book's model predicts the best draft length
$k^* = \\arg\\max_k E[N]/(k/c + 1)$ (`speclab.theory.optimal_k`, [Speedup]({BOOK}/06_speedup.md)).
It assumes a verification costs one target step whatever k is; your $c_{{verify}}(k)$ shows how far
that holds on this machine. Compare the predicted $k^*$ with the best measured k.
"""),
        code("""
alpha_mean = float(np.mean([r[1] for r in rows]))
k_star, s_star = theory.optimal_k(alpha_mean, c)
best = max(rows, key=lambda r: r[4])
print(f"alpha = {alpha_mean:.3f}, c = {c:.2f}: predicted k* = {k_star} (S = {s_star:.2f}); best measured k = {best[0]} (S = {best[4]:.2f})")
""", "choose_k", locked=False),
        md("part4", f"""
## Part 4: memory bandwidth (3 points)

A decode step of one token must read every weight once, read the keys and values of every cached
position (and the new one) and write the new position's keys and values
([Memory-bound decoding]({BOOK}/01_memory_bound.md)). `decode_bytes(cfg, L)` counts that for a
`GPTConfig` (no biases; a tied embedding/output matrix; two RMSNorm gains per block and one final
one; K and V are `d_model` wide per layer), at `bytes_per_value` bytes per number.
`copy_bandwidth(n_bytes)` measures `dst.copy_(src)` (a read and a write per byte), median of
repeats after a warm-up, synchronising on a GPU. The achieved bandwidth of a decode step is
`decode_bytes / step time`; its fraction of the copy bandwidth says how memory-bound the step is.
"""),
        sol("impl_part4", S.PART4),
        test("test_bytes", """
from speclab.model import PRESETS
print("target step at L=100 moves", decode_bytes(PRESETS["target"], 100) / 2**20, "MiB")
assert decode_bytes(PRESETS["target"], 100) > 4 * target.num_params()
"""),
        test("test_bandwidth", """
bw = copy_bandwidth(64 * 2**20)
print(f"copy bandwidth on {DEVICE}: {bw / 1e9:.2f} GB/s")
"""),
        code("""
WIDTHS = (128, 512, 1024) if GRADING else (64, 128, 256, 512, 1024, 1536)
L = 64
sizes, achieved = [], []
for d in WIDTHS:
    cfg = GPTConfig(n_layer=4, n_head=4, d_model=d, max_len=256)
    model = GPT(cfg).to(DEVICE).eval()
    t1 = forward_times(model, [1], context_len=L, repeats=5)[1].median
    sizes.append(4 * model.num_params() / 2**20)
    achieved.append(decode_bytes(cfg, L) / t1)
    del model
fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
ax[0].loglog(sizes, [a / 1e9 for a in achieved], "o-"); ax[0].axhline(bw / 1e9, color="r", ls="--", label="copy bandwidth")
ax[0].set_xlabel("weights (MiB)"); ax[0].set_ylabel("achieved GB/s"); ax[0].legend()
ax[1].semilogx(sizes, [a / bw for a in achieved], "o-"); ax[1].set_xlabel("weights (MiB)"); ax[1].set_ylabel("fraction of copy bandwidth")
plt.tight_layout(); plt.show()
for s, a in zip(sizes, achieved):
    print(f"{s:8.1f} MiB of weights: {a / 1e9:6.2f} GB/s = {a / bw:.2f} of the copy bandwidth")
""", "bandwidth_plot", locked=False),
        md("closing", """
Small models sit far below the copy bandwidth: their step time is per-layer overhead (kernel
launches, Python), not bytes, which is why the draft costs nearly as much per layer as the target.
As the weights grow past the caches the achieved bandwidth approaches the copy bandwidth and
decoding is memory-bound: that is the regime where verifying k + 1 tokens costs about as much as one.

**On a GPU** the same cells run with `DEVICE = cuda`: every timing is bracketed by
`torch.cuda.synchronize()` (`sync()` here, `speclab.measure` in the grader), the pair stays in
float32 so that greedy ties break the same way in a one-token step and a (k + 1)-token verify, and
no CUDA graphs are used, so each small forward pays its kernel-launch overhead. The shipped pair is
tiny for a GPU, so the grader only asks that the best k is not slower than the course's baseline
there (1.0×, instead of 1.3× on a CPU), and still that the measured speedup reaches 0.75 × the
prediction from the run's own α and c.
"""),
    ]


def build() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells()
    set_stable_ids(nb.cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build(), OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
