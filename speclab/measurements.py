"""The machine measurements the book shows, measured once per build and kept beside a reference run.

Notation: see the `speclab` package docstring.

Chapters 1, 7 and 9 show timings. Two runs of the same measuring code stand side by side on
their pages:

* the **reference run**, committed in ``benchmarks/cpu/reference.json`` and written by
  ``python benchmarks/cpu_reference.py`` on a quiet machine (its device, date, load average and
  command are in the file). The prose draws its conclusions from it, so what a page says holds
  whichever machine builds it;
* the **live run** of the machine that builds the page (or of the reader who runs it), which
  the page shows next to the reference and describes in words computed from its numbers.

Each quantity (:data:`QUANTITIES`) is measured once per build and shared by every chapter
that shows it: ``live(name, page)`` returns the stored result when the build's measurement file
(the environment variable ``SPECLAB_LIVE_MEASUREMENTS``, which the book's Sphinx extension sets)
already holds it, and otherwise measures and stores it. So chapters 1, 7 and 9 read one
``T_target(5) / T_target(1)``, not three. The file lives as long as the build's execution
cache (the extension drops it with the cache), so a page re-executed later reads the numbers
the cached pages show. Under an adversarial fake stopwatch (``SPECLAB_FAKE_TIMER``, the tests)
nothing is read or stored: every call measures.

Whether a run was disturbed (timings that stayed unstable, a longer pass measured faster than a
shorter one) is recorded in the file under ``notes``; the book's extension writes those notes to
the build log and to the execution report, not onto the chapter pages.

A result is plain JSON: ``{"timings": {label: {...}}, "values": {...}, "stable": bool,
"notes": [...], "measured_at": ..., "machine": {...}, "load_average": [...]}``; ``timing()``
turns a stored timing back into a :class:`speclab.measure.Timing`.

A third source is read, never measured, by chapters 1 and 7 and Lab 2: the **GPU reference**,
``benchmarks/gpu/<device>-<date>.json`` written by ``python -m benchmarks.gpu.report`` on a lent
GPU (its shape: ``benchmarks/gpu/schema.json``). ``gpu_reference()`` (from ``speclab.gpu_runs``, which
the labs' student edition ships too) returns the newest one, or None when none is committed, so a page
says so instead of typing a figure.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Callable

from speclab import measure
from speclab.gpu_runs import GPU_REFERENCE_DIR, describe_gpu_run, gpu_reference, gpu_step_fit  # noqa: F401
from speclab.measure import Timing
from speclab.timing import MAX_REL_IQR

__all__ = ["QUANTITIES", "LIVE_ENV", "REFERENCE_PATH", "live", "reference", "measure_quantity", "timing",
           "machine", "load_average", "describe_run", "used_by", "unstable", "UNSTABLE_MEANS", "GPU_REFERENCE_DIR", "gpu_reference",
           "describe_gpu_run", "gpu_step_fit"]

LIVE_ENV = "SPECLAB_LIVE_MEASUREMENTS"
REFERENCE_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "cpu" / "reference.json"

CONTEXT = 128  # cached tokens before every timed pass (chapters 1, 7, 9)
PASS_SIZES = tuple(range(1, 10))  # m = k + 1 positions, k = 0..8
ROW_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
BATCHES = (1, 8, 64)
THREADS = 1  # one thread: on a small shared machine the multi-threaded kernels of models this small
# spend longer synchronising threads than computing; chapters 1 and 7 explain it


# ----------------------------------------------------------------------------- machine
def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages of this machine (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine(device: str = "cpu") -> dict:
    """What a run was measured on: the device string of speclab.measure and the software."""
    import torch

    return {"device": measure.device_name(device), "cores": os.cpu_count(), "threads": THREADS,
            "python": platform.python_version(), "torch": torch.__version__, "system": platform.system()}


def _timing_json(t: Timing) -> dict:
    q1, q3 = t.quartiles
    return {"label": t.label, "times": list(t.times), "median": t.median, "q1": q1, "q3": q3,
            "rel_iqr": t.rel_iqr, "stable": t.stable, "rounds": t.rounds, "device": t.device}


# what "stayed unstable" means on a page, in words: the rule speclab.timing applies
UNSTABLE_MEANS = f"an interquartile range above {100 * MAX_REL_IQR:.0f} % of the median"


def unstable(result: dict, labels=None) -> list[str]:
    """The labels of a stored result's timings that stayed unstable (UNSTABLE_MEANS), among ``labels`` when
    given: a page marks a figure that rests on one as not reliable."""
    timings = result["timings"]
    return [label for label in (timings if labels is None else labels) if not timings[label]["stable"]]


def timing(stored: dict) -> Timing:
    """A stored timing as a :class:`speclab.measure.Timing` (its noise figure, quartiles, ...)."""
    return Timing(tuple(stored["times"]), stored["device"], stored["label"], rounds=stored["rounds"])


# --------------------------------------------------------------------------- quantities
def _load_pair():
    """The shipped pair, or untrained models of the same shapes (timings depend on shapes only)."""
    from speclab.model import GPT, GPTConfig

    try:
        from speclab.checkpoints import load_pair

        target, draft = load_pair(device="cpu")
        return target, draft, "the shipped trained checkpoints"
    except Exception:  # no checkpoint: same shapes, random values
        return (GPT(GPTConfig.preset("target")).eval(), GPT(GPTConfig.preset("draft")).eval(),
                "untrained models of the shipped shapes")


def _roofs(budget: float) -> dict:
    """Copy bandwidth (96 MiB, well above a CPU's last-level cache) and float32 matmul throughput."""
    import torch

    bw = measure.copy_bandwidth(n_bytes=96 * 2**20, device="cpu", repeats=5, warmup=1, budget_s=10 * budget)
    mm = measure.matmul_throughput(1024, dtype=torch.float32, device="cpu", repeats=5, warmup=1, budget_s=10 * budget)
    return {"timings": [bw.timing, mm.timing], "sizes": None,
            "values": {"bytes_per_s": bw.bytes_per_s, "flops_per_s": mm.flops_per_s, "matmul_intensity": mm.intensity,
                       "copy_bytes": bw.bytes_moved, "matmul_flops": mm.flops}}


def _rows(budget: float) -> dict:
    """X W for X with m = 1 ... 128 rows and one float32 W of 4096 x 4096 (64 MiB), interleaved."""
    import torch

    n = 4096
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(n, n, generator=gen)  # [n, n], read once per product
    xs = {m: torch.randn(m, n, generator=gen) for m in ROW_COUNTS}  # [m, n]
    timings = measure.time_interleaved([lambda m=m: xs[m] @ w for m in ROW_COUNTS], [f"m={m}" for m in ROW_COUNTS],
                                       repeats=5, warmup=1, device="cpu", budget_s=20 * budget)
    return {"timings": timings, "sizes": list(ROW_COUNTS), "values": {"n": n, "rows": list(ROW_COUNTS)}}


def _passes(budget: float) -> dict:
    """The target's cached forward over m = 1 ... 9 new tokens and the draft's decode step, one run."""
    target, draft, weights = _load_pair()
    fns = measure.forward_step_fns(target, PASS_SIZES, context_len=CONTEXT)
    draft_fn = measure.forward_step_fns(draft, [1], context_len=CONTEXT)[1]
    timings = measure.time_interleaved([*fns.values(), draft_fn], [f"target m={m}" for m in PASS_SIZES] + ["draft m=1"],
                                       repeats=9, warmup=2, device="cpu", budget_s=30 * budget)
    return {"timings": timings, "sizes": list(PASS_SIZES) + [None],
            "values": {"context": CONTEXT, "sizes": list(PASS_SIZES), "weights": weights}}


def _loop(budget: float) -> dict:
    """Whole greedy decoding loops of 32 tokens, target and draft: c as a decoding loop pays it."""
    import torch

    from speclab.sampling import generate

    target, draft, weights = _load_pair()
    prompt = torch.randint(target.cfg.vocab_size, (1, CONTEXT), generator=torch.Generator().manual_seed(1))
    timings = measure.time_interleaved(
        [lambda: generate(target, prompt, 32, temperature=0), lambda: generate(draft, prompt, 32, temperature=0)],
        ["target, 32 greedy tokens", "draft, 32 greedy tokens"], repeats=5, warmup=1, device="cpu", budget_s=15 * budget)
    return {"timings": timings, "sizes": None, "values": {"tokens": 32, "weights": weights}}


def _batches(budget: float) -> dict:
    """The target's pass over 1 and 5 new tokens per request at batch 1, 8 and 64 (context 64)."""
    target, _, weights = _load_pair()
    fns, labels = [], []
    for b in BATCHES:
        f = measure.forward_step_fns(target, [1, 5], context_len=64, batch=b)
        fns += [f[1], f[5]]
        labels += [f"batch {b}, m=1", f"batch {b}, m=5"]
    timings = measure.time_interleaved(fns, labels, repeats=5, warmup=1, device="cpu", budget_s=20 * budget)
    return {"timings": timings, "sizes": None, "values": {"batches": list(BATCHES), "context": 64, "weights": weights}}


HF_TEXTS = ("the cat sat on the mat", "the dog sat on the log", "a cat and a dog met on the mat")


def _hf_pair(budget: float) -> dict:
    """speclab.hf's report on a tiny random GPT-NeoX pair built offline (chapter 7, "Bring a real pair")."""
    import tempfile

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a download
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from speclab.hf import NOISY_IQR, load_hf_pair, pair_report, save_tiny_pair

    with tempfile.TemporaryDirectory() as folder:
        target_dir, draft_dir = save_tiny_pair(folder, "gpt_neox", texts=list(HF_TEXTS), target_extra_rows=3)
        target, draft = load_hf_pair(target_dir, draft_dir, device="cpu")
        report = pair_report(target, draft, "the dog sat on", new_tokens=48, context_len=32, repeats=7)
    notes = [f"the report on the tiny Hugging Face pair flags unstable timings (interquartile range over "
             f"{NOISY_IQR:.0%} of the median): {', '.join(report.noisy)}"] if report.noisy else []
    return {"timings": [], "sizes": None, "notes": notes,
            "values": {"alpha": report.alpha, "greedy_agreement": report.greedy_agreement, "c": report.c,
                       "verify": {str(k): v for k, v in report.verify.items()},
                       "predicted": {str(k): s for k, s in report.predicted.items()}, "best_k": report.best_k,
                       "context": report.context_len}}


# name -> (what it is, measuring function, the pages that show it)
QUANTITIES: dict[str, tuple[str, Callable[[float], dict], tuple[str, ...]]] = {
    "roofs": ("copy bandwidth and matmul throughput", _roofs, ("01_memory_bound",)),
    "rows": ("X W with 1 to 128 rows", _rows, ("01_memory_bound",)),
    "passes": ("the target's passes over 1 to 9 tokens and the draft's step", _passes,
               ("01_memory_bound", "07_machines", "09_mistakes")),
    "loop": ("greedy decoding loops of both models", _loop, ("07_machines",)),
    "batches": ("the target's passes at batch 1, 8 and 64", _batches, ("07_machines",)),
    "hf_pair": ("the report on a tiny Hugging Face pair", _hf_pair, ("07_machines",)),
}


def used_by(name: str) -> tuple[str, ...]:
    """The pages (book/<page>.md) that show a quantity."""
    return QUANTITIES[name][2]


def _checks(result: dict, what: str) -> tuple[bool, list[str]]:
    """Whether a result passed its own checks, and the notes for the build log when it did not."""
    timings = result["timings"]
    if not timings:  # a quantity that checks itself (the Hugging Face report)
        return not result.get("notes"), list(result.get("notes", []))
    sizes = result["sizes"]
    by_size = {s: t for s, t in zip(sizes, timings) if s is not None} if sizes else {}
    note = measure.quality_note(by_size if by_size else timings, what)
    if by_size and len(by_size) < len(timings):  # timings without a size are checked for stability alone
        extra = measure.quality_note([t for s, t in zip(sizes, timings) if s is None], what)
        note = " ".join(n for n in (note, extra) if n) or None
    return note is None, [note] if note else []


def measure_quantity(name: str, budget: float = 1.0) -> dict:
    """Measure one quantity now, on one thread, and return its JSON-able result.

    ``budget`` scales the seconds each measurement may spend re-measuring while unstable (the
    reference run gives more).
    """
    import torch

    what, fn, _ = QUANTITIES[name]
    before_threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        load_before = load_average()
        started = _dt.datetime.now(_dt.timezone.utc)
        raw = fn(budget)
        load_after = load_average()
    finally:
        torch.set_num_threads(before_threads)
    stable, notes = _checks(raw, what)
    return {
        "what": what,
        "timings": {t.label: _timing_json(t) for t in raw["timings"]},
        "values": raw["values"],
        "stable": stable,
        "notes": notes,
        "measured_at": started.isoformat(timespec="seconds"),
        "load_average": {"before": load_before, "after": load_after},
        "machine": machine(),
    }


# -------------------------------------------------------------------------- live / reference
_IN_PROCESS: dict[str, dict] = {}


def _store_path() -> Path | None:
    path = os.environ.get(LIVE_ENV, "").strip()
    return Path(path) if path else None


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)  # a reader never sees half a file


def live(name: str, page: str) -> dict:
    """This build's measurement of ``name``, measured on the first call of the build and shared after.

    ``page`` (e.g. "07_machines") is recorded as a user of the result, for the execution report.
    """
    if name not in QUANTITIES:
        raise KeyError(f"unknown quantity {name!r}; known: {sorted(QUANTITIES)}")
    if isinstance(measure.stopwatch(), measure.FakeStopwatch):
        return measure_quantity(name)  # a test's fake timings: never stored, never reused
    path = _store_path()
    stored = _read(path) if path else {"quantities": _IN_PROCESS}
    result = stored.get("quantities", {}).get(name)
    if result is None:
        result = measure_quantity(name)
        if path:
            stored = _read(path)  # another page may have written meanwhile
            stored.setdefault("quantities", {})[name] = result
        else:
            _IN_PROCESS[name] = result
    if path:
        pages = stored.setdefault("pages", {})
        if name not in pages.get(page, []):
            pages.setdefault(page, []).append(name)
        _write(path, stored)
    return result


def reference(path: Path | str | None = None) -> dict:
    """The committed reference run (``benchmarks/cpu/reference.json``)."""
    path = Path(path) if path else REFERENCE_PATH
    if not path.exists():
        raise FileNotFoundError(f"no reference measurements at {path}; run `python benchmarks/cpu_reference.py`")
    return json.loads(path.read_text())


def describe_run(run: dict) -> str:
    """One line naming a run: device, date and load average, e.g. for a figure legend or a table."""
    load = run.get("load_average", {}).get("before")
    when = run.get("measured_at", "")[:10]
    device = run.get("machine", {}).get("device", "unknown device")
    return f"{device}, {when}" + (f", load {load[0]:.2f}" if load else "")

