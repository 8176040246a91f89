"""The scheduler's decisions, pure: plain data in (Pods, Slurm's jobs and nodes, as read), steps
out, each done by the `*_effects` module of the same concept one level up. `.importlinter`
holds them to it: no adapter but Slurm's data model, no Kubernetes or HTTP client, no threads,
no effects."""
