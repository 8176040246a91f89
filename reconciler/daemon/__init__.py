"""The daemon: sources -> compile -> plan -> apply on each revision, the scheduler beside it."""
