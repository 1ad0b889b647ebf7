"""The committed GPU reference runs (benchmarks/gpu/<device>-<date>.json) and how the book and Lab 2 read
them: every committed file fits the schema and its derived columns follow from its measured ones;
`speclab.measurements.gpu_reference` picks the newest whole report; `gpu_step_fit` recovers a known
per-layer time and bandwidth."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.gpu import report as G
from speclab import gpu_runs, measurements, theory

COMMITTED = sorted(p for p in measurements.GPU_REFERENCE_DIR.glob("*.json")
                   if gpu_runs._GPU_FILE.match(p.name))


@pytest.mark.parametrize("path", COMMITTED, ids=[p.name for p in COMMITTED])
def test_committed_gpu_report_is_whole_and_consistent(path):
    report = json.loads(path.read_text())
    G.validate(report)
    assert not report.get("partial")
    assert path.name == f"{G.device_slug(report['device'])}-{report['date'][:10]}.json"
    copy = report["copy_bandwidth_GBps"] * 1e9
    for row in report["decode"]:
        for kind in ("eager", "graphs"):
            assert math.isclose(row[f"{kind}_fraction_of_copy"], row["step_bytes"] / (row[f"{kind}_ms"] * 1e-3) / copy,
                                rel_tol=1e-9)
    for row in report["spec"]:
        assert math.isclose(row["measured_over_predicted"], row["measured_speedup"] / row["predicted_speedup"], rel_tol=1e-9)
        # the prediction is the cost model's, from the row's own alpha, c and c_verify
        expected = theory.expected_tokens(row["alpha"], row["k"]) / (row["k"] / row["c"] + row["c_verify"])
        assert math.isclose(row["predicted_speedup"], expected, rel_tol=1e-9)


def test_the_book_reads_a_committed_report():
    assert COMMITTED, "no GPU reference run is committed; the book's GPU sections would be empty"
    newest = measurements.gpu_reference()
    assert newest is not None and newest["file"] == COMMITTED[-1].name


def _write(folder, name, date, **extra):
    (folder / name).write_text(json.dumps({"device": "X", "date": f"{date}T00:00:00Z", **extra}))


def test_gpu_reference_takes_the_newest_whole_report(tmp_path):
    assert measurements.gpu_reference(tmp_path) is None
    _write(tmp_path, "nvidia-h100-2026-01-02.json", "2026-01-02")
    _write(tmp_path, "nvidia-h200-2025-12-31.json", "2025-12-31")
    _write(tmp_path, "nvidia-h200-2026-03-01.partial.json", "2026-03-01", partial=True)  # never read
    _write(tmp_path, "gpu-pair-evaluate.json", "2027-01-01")  # not a report's name
    assert measurements.gpu_reference(tmp_path)["file"] == "nvidia-h100-2026-01-02.json"
    _write(tmp_path, "nvidia-h200-2026-02-01.json", "2026-02-01", partial=True)  # a cut-off run renamed by hand
    with pytest.raises(ValueError, match="partial"):
        measurements.gpu_reference(tmp_path)


def test_step_fit_recovers_a_known_per_layer_time_and_bandwidth():
    per_layer, bandwidth = 80e-6, 3.5e12
    rows = [{"config": {"n_layer": n}, "step_bytes": b, "graphs_ms": (n * per_layer + b / bandwidth) * 1e3}
            for n, b in ((6, 1e7), (1, 2.6e7), (16, 4.1e8), (12, 1.2e9), (4, 1.6e9))]
    fit = measurements.gpu_step_fit({"decode": rows, "copy_bandwidth_GBps": 4000.0})
    assert fit["per_layer_s"] == pytest.approx(per_layer, rel=1e-9)
    assert fit["bandwidth_Bps"] == pytest.approx(bandwidth, rel=1e-9)
    assert fit["fraction_of_copy"] == pytest.approx(3.5 / 4.0, rel=1e-9)
    assert fit["max_rel_error"] < 1e-9
    with pytest.raises(ValueError, match="at least 3"):
        measurements.gpu_step_fit({"decode": rows[:2], "copy_bandwidth_GBps": 4000.0})


def test_ops_per_layer_counts_the_four_products_and_the_small_operations():
    from benchmarks.gpu import ops_per_layer

    ops = ops_per_layer.per_layer()
    assert ops["aten::mm"] == 4  # qkv, the output projection, the MLP's up and down
    assert ops["aten::index_copy_"] == 2  # the new key and value written into the static cache
    assert not set(ops) & ops_per_layer.VIEWS
    assert 30 <= sum(ops.values()) <= 60  # the README's "about 40 kernels" per layer
