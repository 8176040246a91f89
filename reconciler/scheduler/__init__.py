"""The Pod-to-Slurm scheduler: a Pod whose schedulerName is ours becomes a placeholder Slurm job,
and is bound where Slurm runs that job.

Each concept that both decides and acts is a pair: `<concept>_decide` is pure (plain data in,
steps or values out) and `<concept>_effects` does what it decided, through adapters and the
shared Effects: pod_ (one Pod), gang_ (a gang), packing_ (bin-packing node weights), power_
(power saving); hook_effects answers the calls hook_server serves. Other pure parts: admission,
placeholder, ownership, jobindex, verdicts; the Kubernetes rules (node_fit, tolerations, pod
rules, quantities) are reconciler.kuberules. The I/O half is one object per concern, composed
by loop.PodScheduler (watch -> cache -> queue -> decide -> effects): state (the cache), effects
(Slurm submits and cancels, API server writes), intake and placement (whether and where a Pod
may go), job_trust (what is checked with Slurm before it is believed).
"""
