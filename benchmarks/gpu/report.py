"""The course measured on one machine, written to one JSON file (issues 20 and 21).

Notation: see the `speclab` package docstring (p = target, q = draft, k = draft length, alpha, c).

    python -m speclab.gpu_report --out benchmarks/gpu/<device>-<date>.json          # a GPU, full sizes
    python -m speclab.gpu_report --sizes tiny --quick --out /tmp/cpu.json           # seconds, any machine
    python -m speclab.gpu_report --lab2 ...       # also autograde the Lab 2 reference under nbgrader
    python -m speclab.gpu_report --pairs shipped,gpu ...   # speculative decoding on these pairs

What it measures (every time is the median of repeats after warm-up, from
torch.utils.benchmark, which synchronises CUDA before reading its clock):

- copy_bandwidth_GBps: dst.copy_(src) of a large buffer, bytes read + bytes written;
- matmul_bf16_TFLOPs: a square bf16 matmul, 2 n^3 FLOPs per call;
- decode: for model sizes from the shipped target up to >= 1 GB of weights (random weights),
  one batch-1 decode step after `context` cached tokens, in the readable eager path
  (`model(tokens, positions, cache)`) and in the static path replayed as a CUDA graph
  (`GraphedStep`); each as a fraction of the copy bandwidth: bytes a step must move
  (every weight once, K and V of the context + 1 positions read, of 1 position written)
  / time / copy bandwidth;
- lab2_autograde (with --lab2): the Lab 2 reference under the real `nbgrader autograde`;
- spec: speculative decoding with the Lab 2 reference decoder (eager; greedy and T = 1) and,
  on CUDA, a greedy decoder built on CUDA graphs, k = 1..8: alpha, c, c_verify(k),
  predicted S = E[N] / (k / c + c_verify) and measured S against the autoregressive baseline
  of the same kind, timed interleaved in the same run.

On a CPU the same code runs with eager kernels in place of graphs (`graphs_ms` then times
the static path without capture; the "graphs" field of each entry says which).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from speclab.model import GPT, PRESETS, GPTConfig, GraphedStep

__all__ = [
    "SIZES", "SPEC_KS", "bench", "copy_bandwidth_gbps", "matmul_tflops", "decode_bytes", "decode_entry",
    "lab2_autograde", "load_lab2_reference", "predicted_speedup", "pooled_alpha", "graphed_greedy_autoregressive", "graphed_greedy_speculative",
    "spec_entries", "build_report", "validate", "main",
]

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "benchmarks" / "gpu" / "schema.json"
SPEC_KS = (1, 2, 3, 4, 5, 6, 7, 8)

# Model sizes of the decode sweep: (name, config or "preset:<name>"). "full" spans the shipped
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
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench(fn: Callable[[], object], min_run_time: float, label: str = "") -> dict:
    """Median and IQR (seconds per call) of fn over blocks, after torch.utils.benchmark's warm-up.

    stable: the IQR is within 10 % of the median (a shared or throttling machine shows up here).
    """
    from torch.utils.benchmark import Timer

    fn()  # one explicit warm-up call (lazy initialisation, allocator) before the Timer's own
    m = Timer(stmt="fn()", globals={"fn": fn}, label=label).blocked_autorange(min_run_time=min_run_time)
    return {"median_s": m.median, "iqr_s": m.iqr, "blocks": len(m.times), "stable": m.iqr <= 0.1 * m.median}


def _interleaved(fns: list[Callable[[], object]], device: torch.device, repeats: int, warmup: int = 1,
                 desc: str = "timing") -> list[float]:
    """Median wall time of each fn, calling them round-robin so that drift hits all alike."""
    times: list[list[float]] = [[] for _ in fns]
    for r in tqdm(range(warmup + repeats), desc=desc, leave=False):
        for i, fn in enumerate(fns):
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            if r >= warmup:
                times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


# ------------------------------------------------------------------- machine roofline
def copy_bandwidth_gbps(device: torch.device, n_bytes: int, min_run_time: float) -> dict:
    """dst.copy_(src) of n_bytes: (read + write) bytes / median time, in GB/s (1e9)."""
    src = torch.ones(n_bytes // 2, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src), min_run_time, "copy")
    moved = 2 * src.numel() * src.element_size()
    return {"GBps": moved / t["median_s"] / 1e9, "bytes": moved, **t}


def matmul_tflops(device: torch.device, n: int, min_run_time: float) -> dict:
    """[n, n] @ [n, n] in bf16: 2 n^3 / median time, in TFLOP/s (1e12)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device, torch.bfloat16)
    b = torch.randn(n, n, generator=g).to(device, torch.bfloat16)
    out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
    t = bench(lambda: torch.matmul(a, b, out=out), min_run_time, "matmul")
    return {"TFLOPs": 2 * n**3 / t["median_s"] / 1e12, "n": n, **t}


# ------------------------------------------------------------------------ decode sweep
def decode_bytes(model: GPT, context_len: int) -> int:
    """Least bytes one decode step must move: every weight once (as stored), K and V of the
    context_len + 1 attended positions read, K and V of the new position written."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    per_position = 2 * model.cfg.n_layer * model.cfg.d_model * model.embed.weight.element_size()
    return weights + per_position * (context_len + 1) + per_position


def _slots(needed: int, max_len: int) -> int:
    """A cache capacity >= needed, rounded up to a multiple of 16 (the alignment the fused attention
    kernels want for a mask's last dimension), at most max_len."""
    return min(max_len, -(-needed // 16) * 16)


def _random_model(cfg: GPTConfig, device: torch.device, dtype: torch.dtype, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    with torch.device(device):  # initialise on the device: a 1.6 GB model is slow to init on a CPU
        model = GPT(cfg)
    return model.to(dtype).eval()


def decode_entry(name: str, cfg: GPTConfig, device: torch.device, dtype: torch.dtype, context_len: int,
                 copy_GBps: float, min_run_time: float, compile: bool = False) -> dict:
    """One row of the decode sweep: eager and graphed decode step of a random-weight model."""
    model = _random_model(cfg, device, dtype)
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
    capacity = _slots(context_len + 1, cfg.max_len)
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
        compiled = bench(compiled_step, min_run_time, f"{name} compiled+graphs")
        del cstep
    need = decode_bytes(model, context_len)
    params = sum(p.numel() for p in model.parameters())
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    te = bench(eager, min_run_time, f"{name} eager")
    tg = bench(graphed, min_run_time, f"{name} graphs")
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


# ------------------------------------------------------------------------ Lab 2 grading
def lab2_autograde(timeout_s: float = 1800.0) -> dict:
    """Autograde the Lab 2 reference solution with the real `nbgrader autograde`, the way the test
    fixture does (tests/conftest.py): a throw-away course that loads autograder/nbgrader_config.py,
    the release generated from solutions/lab2, the reference submitted as one student.

    Never raises: a failure (the lab being restructured, nbgrader missing) comes back as
    {"points": None, "total": None, "seconds": ..., "error": "..."}.
    """
    t0 = time.perf_counter()
    try:
        import nbformat

        _repo_on_path()

        for path in (REPO / "solutions" / "lab2", REPO / "autograder" / "nbgrader_config.py"):
            if not path.exists():
                raise FileNotFoundError(f"{path} is missing: the lab sources moved? (see autograder/LAB2.md)")
        import shutil

        nbgrader = Path(sys.executable).parent / "nbgrader"  # the venv's, else the one on PATH (GPU image: /tmp/site/bin)
        if not nbgrader.exists():
            found = shutil.which("nbgrader")
            if found is None:
                raise FileNotFoundError("nbgrader not found: install it, or on a bare GPU image carry `make gpu-wheels`'s .whl/")
            nbgrader = Path(found)
        with tempfile.TemporaryDirectory(prefix="lab2-gpu-") as tmp:
            root = Path(tmp)
            (root / "nbgrader_config.py").write_text(
                "c = get_config()\n"
                f"load_subconfig({str(REPO / 'autograder' / 'nbgrader_config.py')!r})\n")
            (root / "solutions").symlink_to(REPO / "solutions", target_is_directory=True)
            env = dict(os.environ, PATH=f"{nbgrader.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                       PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))

            def run(*args: str) -> None:
                proc = subprocess.run([str(nbgrader), *args], cwd=root, env=env, capture_output=True, text=True,
                                      timeout=timeout_s)
                if proc.returncode != 0:
                    raise RuntimeError(f"nbgrader {' '.join(args)} failed: {proc.stderr[-2000:]}")

            run("generate_assignment", "lab2", "--force")
            release = nbformat.read(root / "labs" / "lab2" / "lab2.ipynb", as_version=4)
            sub = root / "submitted" / "reference" / "lab2" / "lab2.ipynb"
            sub.parent.mkdir(parents=True)
            nbformat.write(_reference_submission(release), sub)
            t_grade = time.perf_counter()
            run("autograde", "lab2", "--force", "--student=reference")
            seconds = time.perf_counter() - t_grade
            from nbgrader.api import Gradebook

            with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
                nb = gb.find_submission_notebook("lab2", "lab2", "reference")
                cells = {g.name: [float(g.score), float(g.max_score)] for g in nb.grades}
        return {"points": sum(s for s, _ in cells.values()), "total": sum(m for _, m in cells.values()),
                "seconds": seconds, "cells": cells}
    except Exception as err:  # noqa: BLE001 -- the report must survive a broken lab
        return {"points": None, "total": None, "seconds": time.perf_counter() - t0,
                "error": f"{type(err).__name__}: {err}"[:3000]}


# ------------------------------------------------------------------ speculative decoding
def _reference_submission(release):
    """The release notebook with the reference solution filled in, by whichever helper this
    checkout's autograder has (the lab sources are being restructured)."""
    import inspect

    import nbformat

    from autograder.mutants import make_submission

    params = list(inspect.signature(make_submission).parameters)
    if params[:2] == ["lab", "release_nb"]:  # make_submission(lab, release_nb, m=None)
        return make_submission("lab2", release)
    source = nbformat.read(REPO / "solutions" / "lab2" / "lab2.ipynb", as_version=4)  # make_submission(release, source)
    return make_submission(release, source)


def load_lab2_reference() -> dict:
    """The Lab 2 reference decoders (speculative_decode, autoregressive_decode), executed from the solution notebook the students' release is built from,
    or, failing that, from autograder/lab2_solution.py."""
    _repo_on_path()
    threads = torch.get_num_threads()  # the lab's set-up cell pins one CPU thread; keep ours
    try:
        return _load_lab2_reference()
    finally:
        torch.set_num_threads(threads)


def _repo_on_path() -> None:
    """`autograder` is imported from the checkout, it is not an installed package."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def _load_lab2_reference() -> dict:
    errors = []
    needed = ("speculative_decode", "autoregressive_decode")
    try:  # autograder.reference.load(lab): the solution cells of solutions/<lab>/<lab>.md as a module
        from autograder import reference

        module = reference.load("lab2")
        if all(hasattr(module, name) for name in needed):
            return dict(vars(module))
        errors.append("autograder.reference.load('lab2') lacks one of the reference decoders")
    except Exception as err:  # noqa: BLE001
        errors.append(f"autograder.reference: {type(err).__name__}: {err}")
    try:
        import nbformat

        from autograder.mutants import reference_namespace

        ns = reference_namespace(nbformat.read(REPO / "solutions" / "lab2" / "lab2.ipynb", as_version=4))
        if all(name in ns for name in needed):
            return ns
        errors.append("solutions/lab2/lab2.ipynb lacks one of the reference functions")
    except Exception as err:  # noqa: BLE001
        errors.append(f"solution notebook: {type(err).__name__}: {err}")
    try:
        from autograder import lab2_solution as S

        ns = {}
        for part in ("SETUP", "PART1", "PART2", "PART3"):
            exec(getattr(S, part).replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), ns)  # noqa: S102
        return ns
    except Exception as err:  # noqa: BLE001
        errors.append(f"autograder/lab2_solution.py: {type(err).__name__}: {err}")
    raise RuntimeError("cannot load the Lab 2 reference decoder: " + "; ".join(errors))


def _expected_tokens(alpha: float, k: int) -> float:
    return float(k + 1) if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, k: int, c: float, c_verify: float) -> float:
    """S = E[N] / (k / c + c_verify), the Lab 2 cost model (costs in target forwards)."""
    return _expected_tokens(alpha, k) / (k / c + c_verify)


def pooled_alpha(accepted: list[int], k: int) -> float:
    """Accepted drafts / verified drafts: a step that stops at its first rejection verified a + 1
    drafts when it accepted a < k, and k when it accepted all k."""
    if not accepted:
        raise ValueError("no speculative steps to estimate alpha from")
    return sum(accepted) / sum(min(a + 1, k) for a in accepted)


class _GraphedPair:
    """CUDA-graph steps of a (target, draft) pair for greedy decoding; eager static path off CUDA."""

    def __init__(self, target: GPT, draft: GPT, capacity: int, ks) -> None:
        self.target, self.draft = target, draft
        capacity = _slots(capacity, min(target.cfg.max_len, draft.cfg.max_len))
        self.tc = target.new_static_cache(max_len=capacity)
        self.dc = draft.new_static_cache(max_len=capacity)
        self.t1 = GraphedStep(target, self.tc, T=1)
        self.d1 = GraphedStep(draft, self.dc, T=1)
        self.verify = {k: GraphedStep(target, self.tc, T=k + 1) for k in ks}


@torch.inference_mode()
def graphed_greedy_autoregressive(pair: _GraphedPair, prompt: torch.Tensor, n: int) -> list[int]:
    """Greedy decoding with the target alone, one graphed step per token and no host read until the end."""
    dev = prompt.device
    pair.tc.reset()
    logits = pair.target.forward_static(prompt[None], pair.tc)[0, -1]  # [V]
    out = torch.empty(n, dtype=torch.long, device=dev)
    tok = logits.argmax().view(1, 1)
    for i in range(n):
        out[i] = tok[0, 0]
        if i + 1 < n:
            tok = pair.t1(tok)[0, -1].argmax().view(1, 1)
    return out.tolist()


@torch.inference_mode()
def graphed_greedy_speculative(pair: _GraphedPair, prompt: torch.Tensor, n: int, k: int) -> tuple[list[int], list[int]]:
    """Greedy speculative decoding on graphed steps: k draft steps and one (k+1)-token verify are
    launched without reading anything back; one host read per step decides how many were accepted.

    The same rule as the Lab 2 reference at temperature 0 (accept a draft iff it is the target's
    argmax; emit the target's argmax at the first mismatch, or the bonus after k matches), so the
    tokens equal greedy autoregressive decoding. Steps always draft k tokens; the output is cut at
    n tokens. Both caches hold len(seq) - 1 positions at the top of the loop; the host knows every
    length, so rollbacks are unchecked device writes (no sync).
    """
    if k not in pair.verify:
        raise ValueError(f"no verify graph for k={k}; captured: {sorted(pair.verify)}")
    pair.tc.reset()
    pair.dc.reset()
    T0 = prompt.numel()
    if T0 > 1:
        pair.target.forward_static(prompt[None, :-1], pair.tc)
        pair.draft.forward_static(prompt[None, :-1], pair.dc)
    length = T0 - 1  # positions held by both caches
    last = prompt[-1:].view(1, 1)
    new: list[int] = []
    accepted: list[int] = []
    while len(new) < n:
        x, drafts = last, []
        for _ in range(k):
            x = pair.d1(x)[0, -1].argmax().view(1, 1)
            drafts.append(x)
        block = torch.cat([last] + drafts, dim=1)  # [1, k+1]
        best = pair.verify[k](block)[0].argmax(dim=-1)  # [k+1] the target's argmax after each prefix
        host = torch.cat([best, block[0, 1:]]).tolist()  # the one host read of the step
        best_h, drafted = host[: k + 1], host[k + 1 :]
        a = next((i for i in range(k) if best_h[i] != drafted[i]), k)  # accepted drafts
        emitted = best_h[: a + 1]  # a accepted drafts (equal to the target's argmax) + the target's token after them
        accepted.append(a)
        new.extend(emitted)
        keep = length + len(emitted)  # new length of both caches: len(seq) - 1
        pair.tc.rollback_unchecked(keep)
        if a == k:  # the draft never saw its own last draft token: feed it (one graphed draft step)
            pair.dc.rollback_unchecked(length + k)
            pair.d1(drafts[-1])
        else:
            pair.dc.rollback_unchecked(keep)
        length = keep
        last = best[a : a + 1].view(1, 1)  # emitted[-1], still on the device
    return new[:n], accepted


def _eager_step_fns(model: GPT, sizes, context_len: int) -> dict[int, Callable[[], object]]:
    """One closure per T: a cached eager forward of T new tokens after context_len cached ones."""
    dev = model.device
    gen = torch.Generator().manual_seed(0)
    cache = model.new_cache(batch=1, max_len=context_len + max(sizes))
    with torch.inference_mode():
        model(torch.randint(256, (1, context_len), generator=gen).to(dev), torch.arange(context_len, device=dev), cache)
    blocks = {t: torch.randint(256, (1, t), generator=gen).to(dev) for t in sizes}
    positions = {t: torch.arange(context_len, context_len + t, device=dev) for t in sizes}

    def step(t):
        @torch.inference_mode()
        def run():
            cache.rollback(context_len)
            return model(blocks[t], positions[t], cache)
        return run

    return {t: step(t) for t in sizes}


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

    # costs of the eager steps the reference decoder runs: c and c_verify(k), interleaved
    ft = _eager_step_fns(target, [1] + [k + 1 for k in ks], context_len=64)
    fd = _eager_step_fns(draft, [1], context_len=64)
    med = _interleaved([fd[1]] + list(ft.values()), device, repeats=cost_repeats, warmup=3, desc="c, c_verify")
    c = med[1] / med[0]
    c_verify = {k: max(1.0, med[2 + i] / med[1]) for i, k in enumerate(ks)}  # below 1 is timing noise

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
        times = _interleaved(fns, device, repeats, desc=f"{pair} T={temperature}")
        for i, k in enumerate(ks):
            alpha = pooled_alpha(last_acc[k], k)
            pred = predicted_speedup(alpha, k, c, c_verify[k])
            meas = times[0] / times[1 + i]
            rows.append({"pair": pair, "dtype": str(dtype).removeprefix("torch."), "decoder": "lab2-reference (eager)", "k": k, "temperature": float(temperature),
                         "alpha": alpha, "c": c, "c_verify": c_verify[k], "predicted_speedup": pred,
                         "measured_speedup": meas, "measured_over_predicted": meas / pred, "tokens": tokens,
                         "baseline_ms_per_token": times[0] / tokens * 1e3})

    if graphs:
        L = 64  # costs of the graphed steps at a 64-token context, interleaved
        capacity = min(target.cfg.max_len, max(prompt.numel() + tokens, L) + max(ks) + 2)
        gp = _GraphedPair(target, draft, capacity, ks)
        context = torch.arange(L, device=device)[None] % 200 + 32  # any L valid tokens

        def at(cache, step, T):
            def run():
                cache.rollback_unchecked(L)
                step(torch.zeros(1, T, dtype=torch.long, device=device))
            return run

        with torch.inference_mode():
            gp.target.forward_static(context, gp.tc)
            gp.draft.forward_static(context, gp.dc)
        med = _interleaved([at(gp.dc, gp.d1, 1), at(gp.tc, gp.t1, 1)] + [at(gp.tc, gp.verify[k], k + 1) for k in ks],
                           device, repeats=cost_repeats, warmup=3, desc="graphed c")
        gc = med[1] / med[0]
        gv = {k: max(1.0, med[2 + i] / med[1]) for i, k in enumerate(ks)}
        accs: dict[int, list] = {}

        def gspec(k):
            def run():
                _, acc = graphed_greedy_speculative(gp, prompt, tokens, k)
                accs.setdefault(k, []).extend(acc[:-1])
            return run

        times = _interleaved([lambda: graphed_greedy_autoregressive(gp, prompt, tokens)] + [gspec(k) for k in ks],
                             device, repeats, desc=f"{pair} graphed")
        for i, k in enumerate(ks):
            alpha = pooled_alpha(accs[k], k)
            pred = predicted_speedup(alpha, k, gc, gv[k])
            meas = times[0] / times[1 + i]
            rows.append({"pair": pair, "dtype": str(dtype).removeprefix("torch."), "decoder": "graphed greedy" if gp.t1.captured else "static greedy (no CUDA)",
                         "k": k, "temperature": 0.0, "alpha": alpha, "c": gc, "c_verify": gv[k],
                         "predicted_speedup": pred, "measured_speedup": meas, "measured_over_predicted": meas / pred,
                         "tokens": tokens, "baseline_ms_per_token": times[0] / tokens * 1e3})
    return rows


# ------------------------------------------------------------------------------ report
def _device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu ({cpu}, {torch.get_num_threads()} threads)"


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
        torch.backends.cuda.matmul.allow_tf32 = True
    command = "python -m speclab.gpu_report " + " ".join(sys.argv[1:] if argv is None else argv)
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
