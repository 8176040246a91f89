"""The Pod-to-Slurm scheduler: a Pod whose schedulerName is ours becomes a placeholder Slurm job,
and is bound where Slurm runs that job.

Pure halves (admission, placeholder, decide, gang, topology, tolerations; node affinity is in
reconciler.kuberules) take plain data. The I/O half is one object per concern, composed by
loop.PodScheduler (watch -> cache -> queue -> decide -> effects): state (the cache), effects
(Slurm submits and cancels, API server writes), pods and gangs (the single-Pod and gang steps,
peers over the same effects), intake and placement (whether and where a Pod may go),
job_trust (what is checked with Slurm before it is believed), hook_answers and hooks (the
hooks API), packer (bin-packing node weights).
"""
