"""Benchmarks (not tests): run them by hand, see bench/README.md."""
