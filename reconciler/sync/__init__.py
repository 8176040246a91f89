"""Keeping Slurm and Kubernetes in step about things neither side's config says: node health.

`node_health` decides (pure: plain data in, actions out); `node_health_effects` reads both
sides through the adapters and carries the actions out, once per interval of the daemon's
node-sync job (a pure/I-O pair is named `<concept>_decide` / `<concept>_effects`).
"""
