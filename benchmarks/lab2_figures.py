"""Figures of the Lab 2 closing note: `python -m benchmarks.lab2_figures [--tokens N]`.

Runs the reference decoder (`autograder.authoring.reference.load("lab2")`) on the shipped pair on this
machine's device (CUDA if present, else the CPU on one thread) and prints, per k:
pooled alpha, c, c_verify(k), the predicted S, the measured S and their ratio, then the
copy bandwidth and the achieved bandwidth of decode steps for targets of increasing width.

Everything of the speedup table is timed in ONE interleaved run (speclab.measure,
self-checking: relative IQR <= 10 % or re-measured within --budget seconds): the course
baseline (greedy `speclab.sampling.generate` with the target), the same with the draft,
the reference decoder at every k, and loops of target forwards over 1 and k + 1 tokens.
The cost model is the one of the lab and chapter 7, S = E[N] / (k / c + c_verify(k)), with
c = T_target / T_draft measured as decode steps *as a decoding loop runs them* (the ratio of
the two greedy runs: forward, argmax and the loop's Python work per token), and the draft's
catch-up after a fully accepted step (alpha^k extra draft forwards per step) added to the
draft's share: S = E[N] / ((k + alpha^k) / c + c_verify(k)).

Notation: see the `speclab` package docstring (S = speedup).
"""
from __future__ import annotations

import argparse

import torch

from autograder.authoring import reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of re-measuring an unstable table")
    args = ap.parse_args()
    ns = vars(reference.load("lab2"))
    from speclab.checkpoints import load_pair
    from speclab.data import heldout_windows
    from speclab.measure import (copy_bandwidth, device_name, forward_step_fns, forward_times, quality_note,
                                 time_interleaved)
    from speclab.theory import expected_tokens
    from speclab.model import GPT, GPTConfig
    from speclab.sampling import generate

    dev = ns["DEVICE"]
    target, draft = load_pair(device=dev, dtype=torch.float32)
    ks = (1, 2, 3, 4, 5, 6, 8)
    prompt = heldout_windows(1, 32, seed=5)[0].to(dev)
    n = args.tokens
    tf = forward_step_fns(target, [1] + [k + 1 for k in ks], context_len=64)

    def loop(fn, calls=16):
        def run():
            for _ in range(calls):
                fn()
        return run

    fns = [lambda: generate(target, prompt[None], n, temperature=0),
           lambda: generate(draft, prompt[None], n, temperature=0)]
    fns += [lambda k=k: ns["speculative_decode"](target, draft, prompt, n, k) for k in ks]
    fns += [loop(f) for f in tf.values()]
    labels = ["baseline (target)", "draft"] + [f"k={k}" for k in ks] + [f"16 x target T={t}" for t in tf]
    times = dict(zip(labels, time_interleaved(fns, labels, repeats=args.repeats, warmup=1, device=dev,
                                              budget_s=args.budget)))
    base = times["baseline (target)"]
    c = base.median / times["draft"].median
    print(f"\n{device_name(dev)}, {torch.get_num_threads()} thread(s), greedy, {n} new tokens; "
          f"c = {c:.2f} (from whole greedy runs of each model)")
    print(" k  alpha  c_verify(k)  predicted S  measured S  measured/predicted  noise")
    for k in ks:
        _, acc = ns["speculative_decode"](target, draft, prompt, n, k)
        a = ns["pooled_alpha"](acc[:-1], k)
        v = max(1.0, times[f"16 x target T={k + 1}"].median / times["16 x target T=1"].median)  # < 1 is noise
        tokens = float(expected_tokens(a, k))
        predicted = tokens / ((k + a**k) / c + v)
        measured = base.median / times[f"k={k}"].median
        print(f"{k:2d}  {a:.3f}  {v:11.2f}  {predicted:11.2f}  {measured:10.2f}  {measured / predicted:18.3f}  "
              f"{times[f'k={k}'].noise}")
    note = quality_note(list(times.values()), "the speedup table")
    if note:
        print(note.replace("**", ""))
    bw = copy_bandwidth(64 * 2**20, device=dev).bytes_per_s
    print(f"copy bandwidth (torch dst.copy_(src), 64 MiB): {bw / 1e9:.2f} GB/s; the lab's copy_bandwidth: "
          f"{ns['copy_bandwidth'](64 * 2**20) / 1e9:.2f} GB/s")
    for d in (64, 256, 512, 1024, 1536):
        cfg = GPTConfig(n_layer=4, n_head=4, d_model=d, max_len=256)
        model = GPT(cfg).to(dev).eval()
        t1 = forward_times(model, [1], context_len=64, repeats=args.repeats)[1].median
        b = ns["decode_bytes"](cfg, 64)
        print(f"d_model {d:5d}: {b / 2**20:7.1f} MiB per step, {t1 * 1e3:7.3f} ms, {b / t1 / 1e9:6.2f} GB/s = {b / t1 / bw:.2f} of copy")


if __name__ == "__main__":
    main()
