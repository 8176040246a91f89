"""Slurm's state on the daemon's /metrics: nodes, jobs, pending reasons, scheduler statistics
and GPU allocation.

`figures` turns one read into metric families (pure: plain data in, families out); `reader`
reads Slurm through the adapters on the daemon's interval and keeps the last families;
`collector` serves them at scrape time, so a scrape never waits for Slurm.
"""
