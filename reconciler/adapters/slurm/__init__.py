"""Slurm through slurmrestd: one client (client.py), one version-neutral model (model.py), the
HTTP transport (transport.py), one codec per REST version (v0038.py; v0040.py for v0.0.40 to
v0.0.42; v0043.py for v0.0.43 and v0.0.44; v0045.py; on codec.py's shared helpers) and JWTs
(jwt.py). Node control, which falls back to scontrol on v0.0.38, is adapters/node_control.py."""
