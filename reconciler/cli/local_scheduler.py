"""The Pod scheduler `local up` runs when the repo's Pods name it (power saving), in-process
beside the node agent: `reconciler schedule REPO --local` as a user would start it, with the
hooks API on a loopback port of its own, so the repo comes up without a second command."""

from __future__ import annotations

from reconciler.cli.schedule import local_scheduler
from reconciler.config.repo import Config
from reconciler.local.stack import LocalStack
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.pod_policies import startup_pod_policies
from reconciler.scheduler.settings import settings_from_values


def start_local_scheduler(config: Config, stack: LocalStack, name: str) -> PodScheduler:
    """Our scheduler under `name` (the one the repo's slurmd Pods name), started: it places
    them, serves the power hooks and publishes the power Secret the repo's programs read."""
    settings = settings_from_values(
        config.values, release=config.settings.release, namespace=config.settings.namespace,
        name=name, hooks_host="127.0.0.1", hooks_port=0,
    )  # fmt: skip
    scheduler = local_scheduler(stack, settings)
    scheduler.set_policies(startup_pod_policies(config))
    scheduler.start()
    return scheduler
