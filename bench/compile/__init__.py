"""The compile benchmark's parts; bench.compile_bench runs them (see its docstring)."""
