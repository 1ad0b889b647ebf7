"""The committed GPU reference runs: ``benchmarks/gpu/<device>-<date>.json``, written by
``python -m benchmarks.gpu.report`` on a lent GPU (shape: ``benchmarks/gpu/schema.json``).

Notation: see the `speclab` package docstring.

Read, never measured, by chapters 1 and 7 of the book (through ``speclab.measurements``) and by Lab 2.
Nothing here measures or grades, so the labs' student edition ships this module; where the folder is
absent (an installed package, the student edition), ``gpu_reference()`` returns None and the page or
notebook says so.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["GPU_REFERENCE_DIR", "gpu_reference", "describe_gpu_run", "gpu_step_fit"]

GPU_REFERENCE_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"
_GPU_FILE = re.compile(r"^(?P<device>[a-z0-9-]+)-(?P<date>\d{4}-\d{2}-\d{2})\.json$")


def gpu_reference(directory: Path | str | None = None) -> dict | None:
    """The newest committed GPU report (``benchmarks/gpu/<device>-<date>.json``, by its date), with
    its file name under ``"file"``; None when the folder holds none. A partial report (a run cut
    off by its time limit, ``*.partial.json``) is never read: its name does not match."""
    folder = Path(directory) if directory else GPU_REFERENCE_DIR
    found = sorted((m["date"], path) for path in folder.glob("*.json") if (m := _GPU_FILE.match(path.name)))
    if not found:
        return None
    path = found[-1][1]
    report = json.loads(path.read_text())
    if report.get("partial"):
        raise ValueError(f"{path} is a partial report (a run cut off by its time limit); rerun it whole")
    return dict(report, file=path.name)


def describe_gpu_run(report: dict) -> str:
    """One line naming a GPU report: device, date and software, e.g. for a table's header."""
    return f"{report['device']}, {report['date'][:10]} (torch {report['torch']}, CUDA {report['cuda']})"


def gpu_step_fit(report: dict) -> dict:
    """Fit each graphed decode step of a GPU report as ``layers * per_layer + bytes / bandwidth``
    (least squares over the report's model sizes). Returns the per-layer time (s), the effective
    bandwidth (bytes/s), its fraction of the measured copy bandwidth, and the largest relative
    error of the fit over the rows, so that a page can say whether the two terms explain the data."""
    import numpy as np

    rows = report["decode"]
    if len(rows) < 3:
        raise ValueError(f"the fit needs at least 3 model sizes, the report has {len(rows)}")
    design = np.array([[r["config"]["n_layer"], r["step_bytes"]] for r in rows], dtype=float)
    times = np.array([r["graphs_ms"] * 1e-3 for r in rows])
    (per_layer, per_byte), *_ = np.linalg.lstsq(design, times, rcond=None)
    if per_layer <= 0 or per_byte <= 0:
        raise ValueError("the decode rows do not fit a positive per-layer time and bandwidth")
    fitted = design @ np.array([per_layer, per_byte])
    bandwidth = 1.0 / per_byte
    return {"per_layer_s": float(per_layer), "bandwidth_Bps": float(bandwidth),
            "fraction_of_copy": float(bandwidth / (report["copy_bandwidth_GBps"] * 1e9)),
            "max_rel_error": float(np.max(np.abs(fitted - times) / times))}

