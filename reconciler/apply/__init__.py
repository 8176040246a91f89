"""Plan -> changes: the only stage that writes to Kubernetes and Slurm (through the adapters)."""
