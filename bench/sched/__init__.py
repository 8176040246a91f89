"""The scheduler benchmark's parts; bench.scheduler_bench runs them (see its docstring)."""
