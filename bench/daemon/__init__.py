"""The daemon benchmarks' parts: bench.daemon_rss (memory with Pods watched) and
bench.daemon_scale (Pods bound in waves, resyncs of many StatefulSets) run them (see their
docstrings)."""
