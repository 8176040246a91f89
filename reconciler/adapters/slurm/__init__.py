"""Slurm through slurmrestd: one client (client.py), one version-neutral model (model.py),
the HTTP transport (transport.py), one codec per REST version (v0038.py; v0040.py for
v0.0.40-v0.0.42, on codec.py's shared helpers), JWTs (jwt.py) and node control (nodes.py)."""
