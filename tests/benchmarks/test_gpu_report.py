"""`python -m benchmarks.gpu.report` on the CPU with tiny sizes: the JSON fits benchmarks/gpu/schema.json,
the schema rejects broken reports, the decode rows count the bytes a step must move, and the spec rows
are consistent with the cost model. Timings are not asserted here (a shared 2-core machine); what a GPU
must reach is checked by the GPU-marked test. The graphed decoders the report times are tested in
tests/speclab/test_graphed.py.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import torch

from benchmarks.gpu import lab2 as L
from benchmarks.gpu import report as G
from speclab import theory
from speclab.model import GPT, GPTConfig

CUDA = torch.cuda.is_available()


def tiny_pair(seed: int = 0) -> tuple[GPT, GPT]:
    """A random tiny target and a draft that is the target with noise: alpha well inside (0, 1)."""
    torch.manual_seed(seed)
    target = GPT(GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=128)).eval()
    draft = GPT(GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=128)).eval()
    with torch.no_grad():
        for (_, pt), (_, pd) in zip(target.named_parameters(), draft.named_parameters()):
            pt.mul_(6.0)  # sharp distributions, so argmax ties cannot occur
            pd.copy_(pt + 0.6 * pt.std() * torch.randn_like(pt))
    return target, draft


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "cpu.json"
    G.main(["--quick", "--sizes", "tiny", "--pairs", "none", "--out", str(out)])
    assert not out.with_name("cpu.partial.json").exists()  # the partial file goes once the report is whole
    return json.loads(out.read_text())


def test_cpu_report_fits_the_schema_with_every_key(cpu_report):
    G.validate(cpu_report)
    for key in ("device", "torch", "cuda", "date", "copy_bandwidth_GBps", "matmul_bf16_TFLOPs", "decode",
                "lab2_autograde", "spec"):
        assert key in cpu_report
    assert cpu_report["cuda"] is None and cpu_report["device"].startswith("cpu") and cpu_report["schema_checked"]
    assert [d["name"] for d in cpu_report["decode"]] == [name for name, _ in G.SIZES["tiny"]]
    for d in cpu_report["decode"]:
        # the fraction is bytes / time / copy bandwidth, recomputed from the stored fields
        want = d["step_bytes"] / (d["eager_ms"] / 1e3) / (cpu_report["copy_bandwidth_GBps"] * 1e9)
        assert d["eager_fraction_of_copy"] == pytest.approx(want, rel=1e-9)
        assert d["max_abs_logit_diff_eager_vs_graphs"] < 1e-3  # both paths computed the same step
        assert d["graphs"].startswith("static path")


def test_cost_model_hand_values():
    # the report's cost model is speclab.theory's:
    # alpha = 0.5, k = 2: E[N] = 1 + 0.5 + 0.25 = 1.75; cost = 2/4 + 1.5 = 2 target forwards -> S = 0.875
    assert theory.speedup_measured(0.5, 2, 4.0, 1.5) == pytest.approx(0.875)
    assert theory.speedup_measured(1.0, 3, 6.0, 1.0) == pytest.approx(4 / 1.5)
    # k = 3: steps accepting 3, 1, 0 verified 3, 2, 1 drafts: alpha = 4 / 6
    assert theory.alpha_pooled([3, 1, 0], 3) == pytest.approx(4 / 6)


def test_decode_rows_count_weights_and_cache(cpu_report):
    # the "tiny" preset in float32 after a 16-token context: 32,928 parameters (tests/speclab/test_measure.py)
    # of 4 bytes; K and V of 2 layers of width 32 are 2 * 2 * 32 * 4 = 512 bytes per position, read for
    # the 16 + 1 attended positions and written for the 1 new one
    tiny = next(d for d in cpu_report["decode"] if d["name"] == "tiny")
    assert tiny["context"] == 16 and tiny["dtype"] == "float32"
    assert tiny["params"] == 32928 and tiny["weights_bytes"] == 4 * 32928
    assert tiny["step_bytes"] == 4 * 32928 + 512 * 17 + 512


@pytest.mark.parametrize(
    "breakage",
    [
        lambda r: r.pop("copy_bandwidth_GBps"),
        lambda r: r["decode"][0].pop("graphs_ms"),
        lambda r: r["decode"][0].update(eager_fraction_of_copy=-0.5),
        lambda r: r.update(date="yesterday"),
        lambda r: r.update(lab2_autograde={"points": 23}),
        lambda r: r.update(spec=[{"pair": "gpu", "k": 0, "temperature": 0, "alpha": 0.5, "c": 3, "c_verify": 1.1,
                                  "predicted_speedup": 1.5, "measured_speedup": 1.4, "measured_over_predicted": 0.93}]),
        lambda r: r.update(spec=[{"pair": "gpu", "k": 2, "temperature": 0, "alpha": 1.5, "c": 3, "c_verify": 1.1,
                                  "predicted_speedup": 1.5, "measured_speedup": 1.4, "measured_over_predicted": 0.93}]),
    ],
)
def test_schema_rejects_broken_reports(cpu_report, breakage):
    broken = copy.deepcopy(cpu_report)
    breakage(broken)
    with pytest.raises(jsonschema.ValidationError):
        G.validate(broken)


@pytest.mark.slow
def test_spec_rows_on_a_tiny_pair(monkeypatch):
    target, draft = tiny_pair()
    monkeypatch.setattr(G, "_load_pair", lambda pair, device, dtype: (target, draft))
    monkeypatch.setattr(G, "_prompt", lambda device, length=32: torch.arange(40, 72))
    rows = G.spec_entries("tiny-random", torch.device("cpu"), torch.float32, tokens=16, ks=(1, 2),
                          temperatures=(0.0, 1.0), repeats=1, graphs=True, cost_repeats=3)
    report = {"device": "cpu", "torch": torch.__version__, "cuda": None, "date": "2026-01-01T00:00:00Z",
              "command": None, "copy_bandwidth_GBps": 1.0, "matmul_bf16_TFLOPs": 1.0,
              "decode": [{"name": "x", "weights_bytes": 1, "step_bytes": 1, "eager_ms": 1, "graphs_ms": 1,
                          "eager_fraction_of_copy": 1, "graphs_fraction_of_copy": 1, "graphs": "x", "stable": True}],
              "lab2_autograde": None, "spec": rows}
    G.validate(report)
    assert [(r["decoder"].split()[0], r["temperature"], r["k"]) for r in rows] == [
        ("lab2-reference", 0.0, 1), ("lab2-reference", 0.0, 2), ("lab2-reference", 1.0, 1), ("lab2-reference", 1.0, 2),
        ("static", 0.0, 1), ("static", 0.0, 2)]
    for r in rows:
        e_n = (1 - r["alpha"] ** (r["k"] + 1)) / (1 - r["alpha"])
        assert r["predicted_speedup"] == pytest.approx(e_n / (r["k"] / r["c"] + r["c_verify"]), rel=1e-9)
        assert r["measured_over_predicted"] == pytest.approx(r["measured_speedup"] / r["predicted_speedup"], rel=1e-9)
    greedy = [r["alpha"] for r in rows if r["temperature"] == 0.0]
    assert greedy[0] == pytest.approx(greedy[2]) and greedy[1] == pytest.approx(greedy[3])  # same rule, same alpha


def test_missing_gpu_pair_is_recorded_not_fatal(monkeypatch):
    from speclab.checkpoints import CheckpointError

    def missing(pair, device, dtype):
        raise CheckpointError("checkpoint manifest .../gpu/manifest.json is missing. Retrain the pair with "
                              "`python -m speclab.train --pair gpu`")

    monkeypatch.setattr(G, "_load_pair", missing)
    monkeypatch.setattr(G, "decode_entry", lambda *a, **k: {"name": "x", "weights_bytes": 1, "step_bytes": 1,
                        "eager_ms": 1, "graphs_ms": 1, "eager_fraction_of_copy": 1, "graphs_fraction_of_copy": 1,
                        "graphs": "x", "stable": True})
    seen = []
    report = G.build_report(torch.device("cpu"), "tiny", quick=True, pairs=("gpu",),
                            on_progress=lambda r: seen.append(sorted(r)))
    assert report["spec"] == [] and "--pair gpu" in report["spec_errors"]["gpu"]
    # each finished section is handed out at once (main saves it): roofline first, spec last
    assert "copy_bandwidth_GBps" in seen[0] and "decode" not in seen[0] and "spec" in seen[-1]
    assert len(seen) == 1 + len(G.SIZES["tiny"]) + 1 + 1


def test_lab2_autograde_failure_is_reported_not_raised(monkeypatch, tmp_path):
    result = L.lab2_autograde(timeout_s=30, repo=tmp_path)  # a checkout without the lab
    assert result["points"] is None and result["total"] is None and result["error"]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_gpu_decode_reaches_the_memory_roof_with_graphs():
    """Issue 20: the >= 1 GB model's graphed bf16 decode step moves >= 80 % of the copy bandwidth."""
    dev = torch.device("cuda")
    copy_bw = G.copy_bandwidth_gbps(dev, 2 << 30, 0.5)["GBps"]
    name, cfg = next((n, c) for n, c in G.SIZES["full"] if n.startswith("d2048"))
    row = G.decode_entry(name, cfg, dev, torch.bfloat16, 128, copy_bw, 0.5)
    assert row["weights_bytes"] >= 1e9 and row["graphs"] == "cuda graph"
    assert row["graphs_fraction_of_copy"] >= 0.8, row


def test_run_script_refuses_a_machine_without_cuda(tmp_path):
    """benchmarks/gpu/run.sh stops at once, with a message, where torch sees no GPU (and writes nothing)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(["bash", str(root / "benchmarks" / "gpu" / "run.sh"), str(tmp_path / "out")],
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr
    assert not (tmp_path / "out").exists()
