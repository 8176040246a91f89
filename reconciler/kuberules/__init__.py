"""Kubernetes' own rules, as pure functions over plain dicts, for whoever places Pods here: the
scheduler, and the local stack's node agent (which plays the default scheduler for slurmd
Pods). Kept apart from both so neither depends on the other.
"""
