"""The course measured on one machine, written to one JSON file.

Notation: see the `speclab` package docstring (p = target, q = draft, k = draft length, alpha, c).

    python -m benchmarks.gpu.report --out benchmarks/gpu/<device>-<date>.json          # a GPU, full sizes
    python -m benchmarks.gpu.report --sizes tiny --quick --out /tmp/cpu.json           # seconds, any machine
    python -m benchmarks.gpu.report --lab2 ...       # also autograde the Lab 2 reference under nbgrader
    python -m benchmarks.gpu.report --pairs shipped,gpu ...   # speculative decoding on these pairs

(run from the repository root, which puts `speclab`, `benchmarks` and `autograder` on the path).

What it measures, every time with speclab.measure (median of repeats after warm-up, the device
synchronised around every timed sample, ratios timed interleaved in one run):

- copy_bandwidth_GBps: dst.copy_(src) of a large buffer, bytes read + bytes written
  (measure.copy_bandwidth);
- matmul_bf16_TFLOPs: a square bf16 matmul, 2 n^3 FLOPs per call (measure.matmul_throughput);
- decode: for model sizes from the shipped target up to >= 1 GB of weights (random weights),
  one batch-1 decode step after `context` cached tokens, in the readable eager path
  (`model(tokens, positions, cache)`) and in the static path replayed as a CUDA graph
  (`GraphedStep`), each timed in blocks of back-to-back calls; each as a fraction of the copy
  bandwidth: bytes a step must move (measure.decode_step_bytes: every weight once, K and V of
  the context + 1 positions read, of 1 position written) / time / copy bandwidth;
- lab2_autograde (with --lab2): the Lab 2 reference under the real `nbgrader autograde`;
- spec: speculative decoding with the Lab 2 reference decoder (eager; greedy and T = 1) and
  the greedy decoder on CUDA graphs of speclab.graphed, k = 1..8: alpha (theory.alpha_pooled),
  c, c_verify(k), predicted S = E[N] / (k / c + c_verify) (theory.speedup_measured) and measured
  S against the autoregressive baseline of the same kind, timed interleaved in the same run.

On a CPU the same code runs with eager kernels in place of graphs (`graphs_ms` then times
the static path without capture; the "graphs" field of each entry says which).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import re
import sys
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from benchmarks.gpu.lab2 import lab2_autograde, load_lab2_reference
from speclab import measure, theory
from speclab.graphed import GraphedPair, graphed_greedy_autoregressive, graphed_greedy_speculative, static_capacity
from speclab.model import GPT, PRESETS, GPTConfig, GraphedStep

__all__ = [
    "SIZES", "SPEC_KS", "decode_entry", "lab2_autograde", "load_lab2_reference", "spec_entries", "build_report",
    "validate", "summary", "main",
]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "benchmarks" / "gpu" / "schema.json"
SPEC_KS = (1, 2, 3, 4, 5, 6, 7, 8)
REPEATS = 10  # timed samples of every roofline and decode-step timing (each a block of calls)

# Model sizes of the decode sweep: (name, config). "full" spans the shipped
# target (5M parameters) to 1.2 and 1.6 GB of bf16 weights; "tiny" is for tests on a CPU.
SIZES: dict[str, list[tuple[str, GPTConfig]]] = {
    "full": [
        ("shipped target", PRESETS["target"]),
        ("gpu-draft", PRESETS["gpu-draft"]),
        ("gpu-target", PRESETS["gpu-target"]),
        ("d2048 x 12", GPTConfig(n_layer=12, n_head=16, d_model=2048)),  # 604M params, 1.2 GB bf16
        ("d4096 x 4", GPTConfig(n_layer=4, n_head=32, d_model=4096)),  # 806M params, 1.6 GB bf16
    ],
    "tiny": [
        ("tiny", PRESETS["tiny"]),
        ("tiny wide", GPTConfig(n_layer=2, n_head=2, d_model=64, max_len=64)),
    ],
}


# ------------------------------------------------------------------------------ timing
def _stats(t: measure.Timing) -> dict:
    """A Timing as the report stores it: median and IQR in seconds, samples, stable (IQR <= 10 % of the median)."""
    lo, hi = t.quartiles
    return {"median_s": t.median, "iqr_s": hi - lo, "blocks": t.repeats, "stable": t.stable}


def timed(fn: Callable[[], object], device: torch.device, run_time: float, label: str = "") -> dict:
    """measure.time_fn over about run_time seconds: REPEATS samples, each a block of back-to-back calls.

    One call first (warm-up), a second one sizes the block. Blocks, because a CUDA-graph decode
    step takes tens of microseconds, not much more than the synchronisation around every sample.
    """
    fn()
    once = measure.wall_time(fn, device)
    number = max(1, int(run_time / REPEATS / max(once, measure.CLOCK_RESOLUTION_S)))
    t = measure.time_fn(fn, repeats=REPEATS, warmup=1, device=device, label=label, number=number)
    return {**_stats(t), "calls_per_block": number}


def _cost_ratios(draft_step: Callable[[], object], target_steps: dict[int, Callable[[], object]], ks,
                 device: torch.device, repeats: int) -> tuple[float, dict[int, float]]:
    """c = T_target(1) / T_draft(1) and c_verify(k) = T_target(k + 1) / T_target(1), timed interleaved in
    one run; target_steps maps T to a forward of T tokens after the same context."""
    sizes = list(target_steps)
    times = measure.time_interleaved([draft_step] + [target_steps[t] for t in sizes],
                                     ["draft T=1"] + [f"target T={t}" for t in sizes], repeats, 3, device)
    t_target = {t: timing.median for t, timing in zip(sizes, times[1:])}
    # a pass over k + 1 tokens cannot cost less than one over 1 token: a ratio below 1 is timing noise
    return t_target[1] / times[0].median, {k: max(1.0, t_target[k + 1] / t_target[1]) for k in ks}


def _medians(fns: list[Callable[[], object]], device: torch.device, repeats: int) -> list[float]:
    """Median time of each decoder, called round-robin after one warm-up round."""
    return [t.median for t in measure.time_interleaved(fns, None, repeats, 1, device)]


# ------------------------------------------------------------------- machine roofline
def copy_bandwidth_gbps(device: torch.device, n_bytes: int, run_time: float) -> dict:
    """measure.copy_bandwidth of n_bytes in bf16, in GB/s (1e9); unstable timings re-measured for up to run_time."""
    bw = measure.copy_bandwidth(n_bytes, device, torch.bfloat16, repeats=REPEATS, budget_s=run_time)
    return {"GBps": bw.bytes_per_s / 1e9, "bytes": bw.bytes_moved, **_stats(bw.timing)}


def matmul_tflops(device: torch.device, n: int, run_time: float) -> dict:
    """measure.matmul_throughput of [n, n] @ [n, n] in bf16, in TFLOP/s (1e12)."""
    mm = measure.matmul_throughput(n, dtype=torch.bfloat16, device=device, repeats=REPEATS, budget_s=run_time)
    return {"TFLOPs": mm.flops_per_s / 1e12, "n": n, **_stats(mm.timing)}


# ------------------------------------------------------------------------ decode sweep
def _random_model(cfg: GPTConfig, device: torch.device, dtype: torch.dtype, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    with torch.device(device):  # initialise on the device: a 1.6 GB model is slow to init on a CPU
        model = GPT(cfg)
    return model.to(dtype).eval()


def decode_entry(name: str, cfg: GPTConfig, device: torch.device, dtype: torch.dtype, context_len: int,
                 copy_GBps: float, min_run_time: float, compile: bool = False) -> dict:
    """One row of the decode sweep: eager and graphed decode step of a random-weight model."""
    model = _random_model(cfg, device, dtype)
    element = model.embed.weight.element_size()  # every weight and the cache in one dtype
    gen = torch.Generator().manual_seed(1)
    context = torch.randint(cfg.vocab_size, (1, context_len), generator=gen).to(device)
    token = torch.randint(cfg.vocab_size, (1, 1), generator=gen).to(device)
    position = torch.tensor([context_len], device=device)

    cache = model.new_cache(batch=1, max_len=context_len + 1)
    with torch.inference_mode():
        model(context, torch.arange(context_len, device=device), cache)

    @torch.inference_mode()
    def eager():
        cache.rollback(context_len)
        return model(token, position, cache)

    # the static path attends over every slot: keep the capacity just above the context
    capacity = static_capacity(context_len + 1, cfg.max_len)
    scache = model.new_static_cache(batch=1, max_len=capacity)
    with torch.inference_mode():
        model.forward_static(context, scache)
    step = GraphedStep(model, scache, T=1)

    def graphed():
        scache.rollback_unchecked(context_len)
        return step(token)

    with torch.inference_mode():  # the two paths compute the same logits (bf16 tolerance)
        diff = (eager()[0, -1] - graphed()[0, -1]).abs().max().item()
    compiled = None
    if compile:  # Inductor's fused kernels (no cudagraphs of its own) inside our CUDA graph, as gpt-fast does
        fused = torch.compile(model.forward_static, fullgraph=True, dynamic=False)
        cstep = GraphedStep(model, scache, T=1, forward=fused)

        def compiled_step():
            scache.rollback_unchecked(context_len)
            return cstep(token)

        with torch.inference_mode():
            compiled_diff = (eager()[0, -1] - compiled_step()[0, -1]).abs().max().item()
        compiled = timed(compiled_step, device, min_run_time, f"{name} compiled+graphs")
        del cstep
    need = measure.decode_step_bytes(cfg, context_len, weight_bytes=element, kv_bytes=element).total
    params = measure.param_count(cfg)
    weights = params * element
    te = timed(eager, device, min_run_time, f"{name} eager")
    tg = timed(graphed, device, min_run_time, f"{name} graphs")
    captured = step.captured
    del model, cache, scache, step
    if device.type == "cuda":
        torch.cuda.empty_cache()
    per_s = copy_GBps * 1e9
    extra = {} if compiled is None else {
        "compiled_graphs_ms": compiled["median_s"] * 1e3,
        "compiled_graphs_fraction_of_copy": need / compiled["median_s"] / per_s,
        "max_abs_logit_diff_eager_vs_compiled": compiled_diff}
    return {**extra,
        "name": name, "config": cfg.to_dict(), "dtype": str(dtype).removeprefix("torch."),
        "params": params, "weights_bytes": weights,
        "step_bytes": need, "context": context_len,
        "eager_ms": te["median_s"] * 1e3, "graphs_ms": tg["median_s"] * 1e3,
        "eager_iqr_ms": te["iqr_s"] * 1e3, "graphs_iqr_ms": tg["iqr_s"] * 1e3,
        "stable": te["stable"] and tg["stable"],
        "eager_fraction_of_copy": need / te["median_s"] / per_s,
        "graphs_fraction_of_copy": need / tg["median_s"] / per_s,
        "graphs": "cuda graph" if captured else "static path, not captured (no CUDA)",
        "max_abs_logit_diff_eager_vs_graphs": diff,
    }


# ------------------------------------------------------------------ speculative decoding
def _prompt(device: torch.device, length: int = 32) -> torch.Tensor:
    from speclab.data import heldout_windows

    return heldout_windows(1, length, seed=5)[0].to(device)


def _load_pair(pair: str, device: torch.device, dtype: torch.dtype):
    from speclab.checkpoints import load_pair

    return load_pair(device=device, dtype=dtype, preset=pair)


def spec_entries(pair: str, device: torch.device, dtype: torch.dtype, tokens: int, ks, temperatures,
                 repeats: int, graphs: bool, cost_repeats: int | None = None) -> list[dict]:
    """Rows of the `spec` table for one pair: per (decoder, temperature, k) alpha, c, c_verify,
    predicted and measured speedup, the baseline and the decoders timed interleaved in one run."""
    target, draft = _load_pair(pair, device, dtype)
    ns = load_lab2_reference()
    prompt = _prompt(device)
    rows: list[dict] = []
    cost_repeats = max(20, 5 * repeats) if cost_repeats is None else cost_repeats
    dtype_name = str(dtype).removeprefix("torch.")

    # costs of the eager steps the reference decoder runs: c and c_verify(k), interleaved
    target_steps = measure.forward_step_fns(target, [1] + [k + 1 for k in ks], context_len=64)
    c, c_verify = _cost_ratios(measure.forward_step_fns(draft, [1], context_len=64)[1], target_steps, ks, device,
                               cost_repeats)

    for temperature in temperatures:
        seed_holder = {}

        def gen():
            g = torch.Generator(device=device)
            g.manual_seed(seed_holder.setdefault("s", 0))
            seed_holder["s"] += 1
            return g

        last_acc: dict[int, list] = {}

        def spec(k):
            def run():
                _, acc = ns["speculative_decode"](target, draft, prompt, tokens, k, temperature=temperature, generator=gen())
                last_acc.setdefault(k, []).extend(acc[:-1])  # the last step may be cut short by max_new_tokens

            return run

        fns = [lambda: ns["autoregressive_decode"](target, prompt, tokens, temperature=temperature, generator=gen())]
        fns += [spec(k) for k in ks]
        times = _medians(fns, device, repeats)
        for i, k in enumerate(ks):
            alpha = theory.alpha_pooled(last_acc[k], k)
            pred = theory.speedup_measured(alpha, k, c, c_verify[k])
            meas = times[0] / times[1 + i]
            rows.append({"pair": pair, "dtype": dtype_name, "decoder": "lab2-reference (eager)", "k": k, "temperature": float(temperature),
                         "alpha": alpha, "c": c, "c_verify": c_verify[k], "predicted_speedup": pred,
                         "measured_speedup": meas, "measured_over_predicted": meas / pred, "tokens": tokens,
                         "baseline_ms_per_token": times[0] / tokens * 1e3})

    if graphs:
        L = 64  # costs of the graphed steps at a 64-token context, interleaved
        capacity = min(target.cfg.max_len, max(prompt.numel() + tokens, L) + max(ks) + 2)
        gp = GraphedPair(target, draft, capacity, ks)
        context = torch.arange(L, device=device)[None] % 200 + 32  # any L valid tokens

        def at(cache, step, T):
            def run():
                cache.rollback_unchecked(L)
                step(torch.zeros(1, T, dtype=torch.long, device=device))
            return run

        with torch.inference_mode():
            gp.target.forward_static(context, gp.tc)
            gp.draft.forward_static(context, gp.dc)
        graphed_steps = {1: at(gp.tc, gp.t1, 1)} | {k + 1: at(gp.tc, gp.verify[k], k + 1) for k in ks}
        gc, gv = _cost_ratios(at(gp.dc, gp.d1, 1), graphed_steps, ks, device, cost_repeats)
        accs: dict[int, list] = {}

        def gspec(k):
            def run():
                _, acc = graphed_greedy_speculative(gp, prompt, tokens, k)
                accs.setdefault(k, []).extend(acc[:-1])
            return run

        times = _medians([lambda: graphed_greedy_autoregressive(gp, prompt, tokens)] + [gspec(k) for k in ks],
                         device, repeats)
        for i, k in enumerate(ks):
            alpha = theory.alpha_pooled(accs[k], k)
            pred = theory.speedup_measured(alpha, k, gc, gv[k])
            meas = times[0] / times[1 + i]
            rows.append({"pair": pair, "dtype": dtype_name, "decoder": "graphed greedy" if gp.t1.captured else "static greedy (no CUDA)",
                         "k": k, "temperature": 0.0, "alpha": alpha, "c": gc, "c_verify": gv[k],
                         "predicted_speedup": pred, "measured_speedup": meas, "measured_over_predicted": meas / pred,
                         "tokens": tokens, "baseline_ms_per_token": times[0] / tokens * 1e3})
    return rows


# ------------------------------------------------------------------------------ report
# ------------------------------------------------------------------------------ report
def _device_label(device: torch.device) -> str:
    """The GPU's own name on CUDA (it names the JSON file), speclab.measure's description of a CPU."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else measure.device_name(device)


def device_slug(label: str) -> str:
    """A file-name-safe device name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60]


def build_report(device: torch.device, sizes: str = "full", quick: bool = False, lab2: bool = False,
                 pairs: tuple[str, ...] = ("shipped",), spec_tokens: int | None = None, ks=SPEC_KS,
                 temperatures=(0.0, 1.0), compile: bool = False,
                 on_progress: Callable[[dict], None] | None = None) -> dict:
    """The whole report; on_progress(report) is called after each section with what is done so far
    (main() saves it, so a run cut off by a time limit still leaves its finished sections)."""
    progress = on_progress or (lambda _: None)
    gpu = device.type == "cuda"
    dtype = torch.bfloat16 if gpu else torch.float32
    run_time = 0.05 if quick else (0.5 if gpu else 0.2)
    report = {
        "device": _device_label(device), "torch": torch.__version__, "cuda": torch.version.cuda if gpu else None,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "python": platform.python_version(),
        "sizes": sizes, "quick": quick, "dtype": str(dtype).removeprefix("torch."),
        "command": None,  # main() fills it in
    }
    copy = copy_bandwidth_gbps(device, (2 << 30) if gpu and sizes == "full" else (16 << 20), run_time)
    report["copy_bandwidth_GBps"] = copy["GBps"]
    report["copy"] = copy
    mm = matmul_tflops(device, 8192 if gpu and sizes == "full" else 256, run_time)
    report["matmul_bf16_TFLOPs"] = mm["TFLOPs"]
    report["matmul"] = mm
    progress(report)
    context = 128 if sizes == "full" else 16
    element = torch.empty((), dtype=dtype).element_size()

    def big(cfg: GPTConfig) -> bool:  # --compile costs a compilation per size: only the >= 1 GB models get it
        with torch.device("meta"):
            return GPT(cfg).num_params() * element >= 1e9

    report["decode"] = []
    for name, cfg in tqdm(SIZES[sizes], desc="decode sizes", leave=False):
        report["decode"].append(decode_entry(name, cfg, device, dtype, context, copy["GBps"], run_time, compile and big(cfg)))
        progress(report)
    report["lab2_autograde"] = lab2_autograde() if lab2 else None
    progress(report)
    tokens = spec_tokens or (256 if gpu else 64)
    repeats = 3 if quick else 7
    report["spec"] = []
    report["spec_errors"] = {}
    for pair in pairs:
        try:
            report["spec"] += spec_entries(pair, device, dtype, tokens, ks, temperatures, repeats, graphs=True)
        except Exception as err:  # noqa: BLE001 -- a missing GPU pair must not lose the rest of the report
            report["spec_errors"][pair] = f"{type(err).__name__}: {err}"[:2000]
        progress(report)
    return report


def validate(report: dict, schema_path: Path = SCHEMA) -> None:
    """Raise jsonschema.ValidationError when the report does not fit benchmarks/gpu/schema.json."""
    import jsonschema

    jsonschema.validate(report, json.loads(Path(schema_path).read_text()))


def summary(report: dict) -> str:
    lines = [f"{report['device']}, torch {report['torch']}, cuda {report['cuda']}, {report['date']}",
             f"copy {report['copy_bandwidth_GBps']:.1f} GB/s, bf16 matmul {report['matmul_bf16_TFLOPs']:.1f} TFLOP/s",
             f"{'model':>16} {'weights MB':>10} {'eager ms':>9} {'graphs ms':>9} {'eager/copy':>10} {'graphs/copy':>11}"]
    for d in report["decode"]:
        lines.append(f"{d['name']:>16} {d['weights_bytes'] / 1e6:10.1f} {d['eager_ms']:9.3f} {d['graphs_ms']:9.3f} "
                     f"{d['eager_fraction_of_copy']:10.2f} {d['graphs_fraction_of_copy']:11.2f}"
                     + (f"   compiled+graphs {d['compiled_graphs_ms']:.3f} ms = {d['compiled_graphs_fraction_of_copy']:.2f} of copy"
                        if "compiled_graphs_ms" in d else ""))
    lab2 = report.get("lab2_autograde")
    if lab2:
        lines.append(f"Lab 2 autograde: {lab2['points']} / {lab2['total']} in {lab2['seconds']:.0f} s"
                     + (f" ({lab2['error'][:200]})" if lab2.get("error") else ""))
    if report["spec"]:
        lines.append(f"{'pair':>8} {'decoder':>24} {'T':>3} {'k':>2} {'alpha':>6} {'c':>6} {'c_ver':>6} {'pred S':>7} {'meas S':>7} {'m/p':>5}")
        for s in report["spec"]:
            lines.append(f"{s['pair']:>8} {s['decoder'][:24]:>24} {s['temperature']:3.0f} {s['k']:2d} {s['alpha']:6.3f} {s['c']:6.2f} "
                         f"{s['c_verify']:6.2f} {s['predicted_speedup']:7.2f} {s['measured_speedup']:7.2f} {s['measured_over_predicted']:5.2f}")
    for pair, err in report.get("spec_errors", {}).items():
        lines.append(f"spec on pair {pair!r} skipped: {err[:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON file to write (default benchmarks/gpu/<device>-<date>.json); '-' prints only")
    ap.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: cuda when available)")
    ap.add_argument("--sizes", choices=sorted(SIZES), default=None, help="decode sweep (default full on CUDA, tiny otherwise)")
    ap.add_argument("--quick", action="store_true", help="short timings (tests, smoke runs)")
    ap.add_argument("--lab2", action="store_true", help="also autograde the Lab 2 reference under nbgrader (minutes)")
    ap.add_argument("--pairs", default="shipped", help="comma-separated pairs for the spec table: shipped, gpu, or none")
    ap.add_argument("--ks", default=",".join(map(str, SPEC_KS)), help="draft lengths k, comma-separated")
    ap.add_argument("--temperatures", default="0,1", help="comma-separated sampling temperatures of the spec table")
    ap.add_argument("--compile", action="store_true",
                    help="also time the >= 1 GB models' decode step compiled by torch.compile (fused kernels) inside a CUDA graph")
    ap.add_argument("--spec-tokens", type=int, default=None, help="new tokens per decode (default 256 on CUDA, 64 otherwise)")
    args = ap.parse_args(argv)

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda, but this torch build sees no CUDA device")
    sizes = args.sizes or ("full" if device.type == "cuda" else "tiny")
    pairs = tuple(p for p in args.pairs.split(",") if p and p != "none")
    try:
        ks = tuple(int(k) for k in args.ks.split(","))
        temps = tuple(float(t) for t in args.temperatures.split(","))
    except ValueError:
        ap.error("--ks and --temperatures take comma-separated numbers, e.g. --ks 1,2,4 --temperatures 0,1")
    if not ks or min(ks) < 1:
        ap.error(f"draft lengths must be >= 1, got {args.ks}")
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 matmuls, as the training run allows them
    command = "python -m benchmarks.gpu.report " + " ".join(sys.argv[1:] if argv is None else argv)
    slug = device_slug(_device_label(device))
    out = None
    if str(args.out) != "-":
        out = args.out or REPO / "benchmarks" / "gpu" / f"{slug}-{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
    partial = None if out is None else out.with_name(out.stem + ".partial.json")

    def save_partial(rep: dict) -> None:  # not schema-checked: sections still missing
        if partial is not None:
            partial.write_text(json.dumps(dict(rep, command=command, partial=True), indent=1, sort_keys=True) + "\n")

    report = build_report(device, sizes, args.quick, args.lab2, pairs, args.spec_tokens, ks, temps, args.compile,
                          on_progress=save_partial)
    report["command"] = command
    try:
        validate(report)
        report["schema_checked"] = True
    except ImportError:  # a bare GPU image without jsonschema (make gpu-wheels carries it): write anyway, say so
        report["schema_checked"] = False
        print("jsonschema is not installed: the report was NOT checked against benchmarks/gpu/schema.json")
    print(summary(report))
    if out is not None:
        out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
        if partial is not None and partial.exists():
            partial.unlink()
        print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
