"""Measurements of the course on real machines (not part of the installed `speclab` package)."""
