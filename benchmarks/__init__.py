"""Reproducible benchmarks against peers; results go to BENCHMARKS.md."""
