"""Every quality figure of the model card, measured on this machine.

Notation: see the `speclab` package docstring.

    python -m speclab.evaluate                  # everything below, printed as a table
    python -m speclab.evaluate --skip-timing    # only the held-out figures
    python -m speclab.evaluate --json out.json  # also write the figures as JSON

Held-out figures use the held-out files of the stdlib corpus (speclab.data), cut into
consecutive windows of --window bytes (256, the training length); every position of every
window is scored, the first with an empty context.
  * bits/byte = mean over positions of -log2 p(next byte), for p and for q;
  * alpha(T=1) = mean over positions of sum_x min(p(x), q(x)) with p, q = process_logits(., 1.0);
  * greedy agreement = share of positions where argmax p = argmax q (alpha at temperature 0).
Standard errors treat windows as independent clusters.

Timing figures (batch 1, KV cache, context --context bytes already in the cache):
  * c = median time of one cached decode step of the target / the same for the draft;
  * for m = k+1 = 1..9: median time of one target forward over m new tokens, divided by m = 1.
Target and draft (or the different m) are timed interleaved, round-robin, after warm-up,
so that load from other processes hits all of them alike; the ratio of medians is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from speclab.checkpoints import WEIGHTS_DIR, load_model
from speclab.data import load_split
from speclab.measure import forward_step_fns, forward_times, time_interleaved
from speclab.model import GPT
from speclab.sampling import process_logits

__all__ = ["heldout_windows_all", "heldout_figures", "decode_cost_ratio", "verify_cost_curve", "main"]


def heldout_windows_all(window: int, max_bytes: int | None) -> torch.Tensor:
    """The held-out split (its first max_bytes) as consecutive windows: LongTensor [n, window]."""
    data = load_split("heldout")
    if max_bytes is not None:
        data = data[:max_bytes]
    n = len(data) // window
    if n < 1:
        raise ValueError(f"held-out text ({len(data)} bytes) is shorter than one window ({window})")
    return torch.frombuffer(bytearray(data[: n * window]), dtype=torch.uint8).long().view(n, window)


def _cluster_mean_se(per_window: torch.Tensor) -> tuple[float, float]:
    """Mean and standard error of the grand mean, windows as clusters of equal size."""
    x = per_window.double()
    return float(x.mean()), float(x.std(unbiased=True) / x.numel() ** 0.5) if x.numel() > 1 else float("nan")


@torch.no_grad()
def heldout_figures(
    target: GPT,
    drafts: dict[str, GPT],
    window: int = 256,
    max_bytes: int | None = 262144,
    batch: int = 16,
) -> dict:
    """bits/byte of the target and of each draft, and alpha(T=1) and greedy agreement of each draft."""
    windows = heldout_windows_all(window, max_bytes)  # [n, window]
    n = windows.shape[0]
    # the first byte of each window is predicted from the window's own start: feed a newline before it
    inputs = torch.cat([torch.full((n, 1), ord("\n")), windows[:, :-1]], dim=1)  # [n, window]
    sums = {"target_bits": []}
    for name in drafts:
        sums.update({f"{name}_bits": [], f"{name}_alpha": [], f"{name}_agree": []})
    for i in tqdm(range(0, n, batch), desc="held-out", unit="batch", mininterval=2.0):
        x = inputs[i : i + batch].to(target.device)
        y = windows[i : i + batch].to(target.device)
        p_logits = target(x)  # [b, window, V]
        p = process_logits(p_logits, temperature=1.0)
        nll = F.cross_entropy(p_logits.transpose(1, 2), y, reduction="none")  # [b, window], nats
        sums["target_bits"].append((nll / torch.log(torch.tensor(2.0))).mean(1).cpu())
        for name, draft in drafts.items():
            q_logits = draft(x)
            q = process_logits(q_logits, temperature=1.0)
            nll_q = F.cross_entropy(q_logits.transpose(1, 2), y, reduction="none")
            sums[f"{name}_bits"].append((nll_q / torch.log(torch.tensor(2.0))).mean(1).cpu())
            sums[f"{name}_alpha"].append(torch.minimum(p, q).sum(-1).mean(1).cpu())  # sum_x min(p, q)
            sums[f"{name}_agree"].append((p_logits.argmax(-1) == q_logits.argmax(-1)).float().mean(1).cpu())
    out = {"windows": n, "window": window, "bytes": n * window}
    for key, parts in sums.items():
        mean, se = _cluster_mean_se(torch.cat(parts))
        out[key] = {"mean": mean, "se": se}
    return out


def decode_cost_ratio(target: GPT, draft: GPT, context: int = 128, repeats: int = 300, warmup: int = 30) -> dict:
    """c = median cached decode-step time of the target / of the draft (batch 1, one new token).

    Both steps are timed in one run, round-robin (speclab.measure.time_interleaved), after warm-up.
    """
    steps = [forward_step_fns(model, [1], context_len=context)[1] for model in (target, draft)]
    t_target, t_draft = time_interleaved(steps, ["target", "draft"], repeats, warmup, target.device)
    return {"target_s": t_target.median, "draft_s": t_draft.median, "c": t_target.median / t_draft.median,
            "context": context}


def verify_cost_curve(target: GPT, context: int = 128, max_m: int = 9, repeats: int = 200, warmup: int = 20) -> dict:
    """Median time of one target forward over m = 1..max_m new tokens, relative to m = 1 (one interleaved run)."""
    timings = forward_times(target, range(1, max_m + 1), context_len=context, repeats=repeats, warmup=warmup)
    med = {m: t.median for m, t in timings.items()}
    return {"seconds": med, "relative": {m: med[m] / med[1] for m in med}, "context": context}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, default=WEIGHTS_DIR, help="folder with manifest.json and the safetensors")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads for the timings (default 1)")
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--max-bytes", type=int, default=0, help="score only the first this many held-out bytes (default 0 = all of them)")
    ap.add_argument("--context", type=int, default=128, help="cached context before the timed forward")
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-heldout", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    target = load_model("target", device, directory=args.weights)
    drafts = {"draft": load_model("draft", device, directory=args.weights)}
    manifest = json.loads((args.weights / "manifest.json").read_text())
    if "draft_undistilled" in manifest:
        drafts["draft_undistilled"] = load_model("draft_undistilled", device, directory=args.weights)

    results: dict = {
        "device": str(device),
        "machine": f"{platform.machine()} {platform.processor()}".strip(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    print(f"speclab.evaluate on {results['machine']}, device {device}, torch {torch.__version__}, python {results['python']}")
    if not args.skip_heldout:
        torch.set_num_threads(2)
        held = heldout_figures(target, drafts, args.window, args.max_bytes or None)
        results["heldout"] = held
        print(f"\nHeld-out stdlib files: {held['bytes']} bytes in {held['windows']} windows of {held['window']}")
        print(f"  target  bits/byte             {held['target_bits']['mean']:.4f}  (se {held['target_bits']['se']:.4f})")
        for name in drafts:
            print(f"  {name:<17} bits/byte   {held[name + '_bits']['mean']:.4f}  (se {held[name + '_bits']['se']:.4f})")
            print(f"  {name:<17} alpha(T=1)  {held[name + '_alpha']['mean']:.4f}  (se {held[name + '_alpha']['se']:.4f})")
            print(f"  {name:<17} greedy agreement {held[name + '_agree']['mean']:.4f}  (se {held[name + '_agree']['se']:.4f})")
    if not args.skip_timing:
        torch.set_num_threads(args.threads)
        cost = decode_cost_ratio(target, drafts["draft"], args.context, args.repeats)
        curve = verify_cost_curve(target, args.context, 9, max(50, args.repeats * 2 // 3))
        results["cost_ratio"] = cost
        results["verify_curve"] = curve
        load = os.getloadavg() if hasattr(os, "getloadavg") else None
        results["load_average_1m"] = load[0] if load else None
        print(f"\nTimings: batch 1, KV cache with {args.context} bytes, {args.threads} thread(s), medians of interleaved repeats")
        if load:  # timings on shared cores move with the load from other processes
            print(f"  load average (1 min) {load[0]:.2f} on {os.cpu_count()} logical CPUs")
        print(f"  target decode step {cost['target_s'] * 1e3:.3f} ms, draft decode step {cost['draft_s'] * 1e3:.3f} ms")
        print(f"  c = T_target / T_draft = {cost['c']:.2f}")
        print("  target forward over m = k+1 new tokens, time relative to m = 1:")
        print("    " + "  ".join(f"m={m}: {r:.2f}" for m, r in curve["relative"].items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return results


if __name__ == "__main__":
    main()
