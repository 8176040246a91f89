"""The Pod-to-Slurm scheduler: a Pod whose schedulerName is ours becomes a placeholder Slurm job,
and is bound where Slurm runs that job.

Pure halves (admission, affinity, placeholder, decide) take plain data; the I/O half (loop,
hooks) wires them to the adapters.
"""
