"""The daemon memory benchmark's parts; bench.daemon_rss runs them (see its docstring)."""
