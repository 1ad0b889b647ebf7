"""The GPU report: `python -m benchmarks.gpu.report` (see README.md here)."""
