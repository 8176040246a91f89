"""The scheduler benchmark's settings and the small pieces its phases share."""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.harness.loadgen import LoadGenerator, pod_body
from bench.harness.stack import Stack
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.scheduler.decide.placeholder import pod_uid_of
from reconciler.scheduler.decide.pod_decide import ACTIVE_STATES
from reconciler.scheduler.loop import Counters
from reconciler.scheduler.settings import SchedulerSettings, settings_from_values

ROOT = Path(__file__).resolve().parent.parent.parent
REPO = ROOT / "bench" / "fixtures" / "scheduler-repo"
# With gangs: as many CPUs on 16 nodes, so a gang of 8 gets 8 distinct nodes (one per member).
GANG_REPO = ROOT / "bench" / "fixtures" / "scheduler-gang-repo"
CLUSTERS = {REPO: "4 Slurm nodes x 128 CPUs / 512Gi", GANG_REPO: "16 Slurm nodes x 32 CPUs / 128Gi"}
GANG_SIZE = 8
STACK_NAME = "bench-sched"
POD_NAMESPACE = "bench"  # the repo's scheduler.scope.namespaces
RAW_SCRIPT = "#!/bin/sh\nsleep 600\n"
CPU, MEMORY = "100m", "100Mi"  # admission rounds these up to 1 CPU and 100 MB
RAW_CPUS, RAW_MEMORY_MB = 1, 100  # ... which is what the raw jobs ask for
GRACE_SECONDS = 5
SETTLE_TIMEOUT = 180.0  # cancelled jobs gone, deleted Pods gone
P50_TARGET = 1.0
P99_TARGET = 3.0  # burst
WRITES_TARGET = 2.0  # API server writes per bound Pod, happy path
RATIO_TARGET = 0.8

# Jobs in these states still hold (or wait for) resources; COMPLETING is Slurm ending one.
HOLDING = ACTIVE_STATES | {"COMPLETING"}


def pod_template(scheduler_name: str) -> dict[str, Any]:
    """The benchmark's Pod (its name and gang annotations are set per Pod)."""
    return pod_body(
        "", POD_NAMESPACE, scheduler_name, annotations={},
        labels={"app.kubernetes.io/name": "scheduler-bench"},
        requests={"cpu": CPU, "memory": MEMORY}, grace=GRACE_SECONDS,
    )  # fmt: skip


def start_loader(
    stack: Stack, scheduler_name: str, prefix: str, count: int, creators: int, timeout: float,
    rate: float | None = None, gang: int = 0,
) -> LoadGenerator:  # fmt: skip
    """A load generator of the benchmark's Pods for SCHEDULER_NAME (a process of its own)."""
    return LoadGenerator(stack.kubeconfig, pod_template(scheduler_name), prefix, count, creators,
                         timeout, rate, gang, field_manager="scheduler-bench",
                         settle_timeout=SETTLE_TIMEOUT)  # fmt: skip


class LogCapture(logging.Handler):
    """What is logged in this process: WARNING or worse from anyone (the scheduler, urllib3 ...),
    and the scheduler's INFO lines (what it cancelled and why). All go to a file as well."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self._file = path.open("w")
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._file.write(self.format(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
        super().close()


def copy_counters(counters: Counters) -> Counters:
    return Counters(**{k: copy.copy(v) for k, v in vars(counters).items()})  # api_writes too


def counters_since(before: Counters, after: Counters) -> Counters:
    return Counters(**{k: v - getattr(before, k) for k, v in vars(after).items()})


def requests_text(counters: Counters, bound: int) -> str:
    """The scheduler's slurmrestd requests per bound Pod, by operation."""
    made = counters.slurm_requests
    total = sum(made.values())
    kinds = ", ".join(f"{op} {n / bound:.2f}" for op, n in sorted(made.items()))
    return f"{total / bound:.2f} ({kinds})" if bound else "n/a"


def writes_text(counters: Counters, bound: int) -> str:
    """The scheduler's API server writes per bound Pod, by kind."""
    writes = counters.api_writes
    total = sum(writes.values())
    kinds = ", ".join(
        f"{kind.replace(':', ' ')} {n / bound:.2f}" for kind, n in sorted(writes.items())
    )
    return f"{total / bound:.2f} ({kinds})" if bound else "n/a"


def bench_settings(workers: int, name_suffix: str = "", repo: Path = REPO) -> SchedulerSettings:
    config = load_config(read_repo(repo), read_library())
    settings = settings_from_values(
        config.values, release=config.settings.release, namespace=config.settings.namespace,
        hooks_host="127.0.0.1", hooks_port=0, workers=workers,
    )  # fmt: skip
    # A suffixed scheduler is one of several in one run: it answers to its own name only.
    if not name_suffix:
        return settings
    return replace(settings, name=settings.name + name_suffix, aliases=())


def placeholder_jobs_ended(api: SlurmRestApi) -> bool:
    return not any(j.state in HOLDING for j in api.jobs().items if pod_uid_of(j.name) is not None)
