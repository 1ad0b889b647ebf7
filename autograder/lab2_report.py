"""Figures of the Lab 2 closing note: `python -m autograder.lab2_report [--tokens N]`.

Runs the reference decoder (`autograder.reference.load("lab2")`) on the shipped pair on this
machine's device (CUDA if present, else the CPU on one thread) and prints, per k:
pooled alpha, c, c_verify(k), the predicted S and the measured S (median of
interleaved repeats after warm-up, against speclab.sampling.generate as the
course baseline), then the copy bandwidth and the achieved bandwidth of decode
steps for targets of increasing width.

Notation: see the `speclab` package docstring (S = speedup).
"""
from __future__ import annotations

import argparse

import torch

from autograder import reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    ns = vars(reference.load("lab2"))
    from speclab.checkpoints import load_pair
    from speclab.data import heldout_windows
    from speclab.measure import copy_bandwidth, device_name, forward_times, time_interleaved
    from speclab.model import GPT, GPTConfig
    from speclab.sampling import generate

    dev = ns["DEVICE"]
    target, draft = load_pair(device=dev, dtype=torch.float32)
    ks = (1, 2, 3, 4, 5, 6, 8)
    ft = forward_times(target, [1] + [k + 1 for k in ks], context_len=64, repeats=args.repeats)
    fd = forward_times(draft, [1], context_len=64, repeats=args.repeats)
    c = ft[1].median / fd[1].median
    prompt = heldout_windows(1, 32, seed=5)[0].to(dev)
    n = args.tokens
    fns = [lambda: generate(target, prompt[None], n, temperature=0)]
    fns += [lambda k=k: ns["speculative_decode"](target, draft, prompt, n, k) for k in ks]
    times = time_interleaved(fns, repeats=args.repeats, warmup=1, device=dev)
    print(f"\n{device_name(dev)}, {torch.get_num_threads()} thread(s), greedy, {n} new tokens; c = {c:.2f}")
    print(" k  alpha  c_verify(k)  predicted S  measured S")
    for i, k in enumerate(ks):
        _, acc = ns["speculative_decode"](target, draft, prompt, n, k)
        a = ns["pooled_alpha"](acc[:-1], k)
        v = max(1.0, ft[k + 1].median / ft[1].median)  # below 1 is timing noise
        print(f"{k:2d}  {a:.3f}  {v:11.2f}  {ns['predicted_speedup'](a, k, c, v):11.2f}  {times[0].median / times[1 + i].median:10.2f}")
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
