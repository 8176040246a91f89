"""Slurm on Kubernetes, driven by git.

Data flows one way: config repo -> compile -> policy -> plan -> apply, with the Pod-to-Slurm
scheduler beside it. The pure stages (config, compile, plan) import no client library.
"""

__version__ = "0.1.0"
