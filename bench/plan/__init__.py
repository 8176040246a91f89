"""The plan benchmark's parts; bench.plan_bench runs them (see its docstring)."""
