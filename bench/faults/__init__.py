"""The chaos benchmark's parts; bench.chaos runs them (see its docstring)."""
