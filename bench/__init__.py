"""Benchmarks of the message store: ``python -m bench.run --write bench/RESULTS.md``."""
