"""The policy benchmark's parts; bench.policy_bench runs them (see its docstring)."""
