"""Part 1 of bench.daemon_scale: Pods bound through `reconciler run`, in waves.

Each wave creates up to --wave Pods that admission accepts (cpu and memory requests), waits
until the daemon has bound them all (its /metrics counters), checks each against Slurm (one
placeholder job per Pod, RUNNING on the Slurm node its annotation names), then deletes them and
waits until they are gone and no placeholder job holds resources any more. So at most --wave
jobs run at once (each is a slurmstepd, a sh and a sleep on this machine), and --pods are bound
in all.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.daemon.process import Daemon
from bench.harness import loadgen
from bench.harness.procs import MIB, Sample, sample
from bench.harness.report import say
from bench.harness.timing import wait_until
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.jwt import TokenSource
from reconciler.adapters.slurm.model import SlurmJob, SlurmRestApi
from reconciler.adapters.slurm.transport import Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.scheduler.placeholder import pod_uid_of
from reconciler.scheduler.pod_decide import ACTIVE_STATES

NAMESPACE = "bench"  # bench/fixtures/scheduler-repo's scheduler.scope.namespaces
CLUSTER_CPUS = 512  # that repo's 4 Slurm nodes x 128 CPUs: one per Pod at the most
LABEL = {"app.kubernetes.io/name": "daemon-scale-bench"}
SELECTOR = "app.kubernetes.io/name=daemon-scale-bench"
REQUESTS = {"cpu": "100m", "memory": "100Mi"}  # admission rounds these up to 1 CPU, 100 MB
GRACE_SECONDS = 5
CLEANUP_TIMEOUT = 300.0
# Jobs in these states hold (or wait for) resources; COMPLETING is Slurm ending one.
HOLDING = ACTIVE_STATES | {"COMPLETING"}
MAX_JOB_COUNT = 10000  # Slurm's default; the repo leaves it, and MinJobAge (300 s), alone
COUNTERS = ("bound", "refused", "submitted", "jobs_cancelled", "pods_deleted")


def counters(daemon: Daemon) -> dict[str, int]:
    """The daemon's scheduler counters (COUNTERS) from its /metrics."""
    values = daemon.metrics()
    return {c: int(values.get(f"reconciler_scheduler_{c}_total", 0)) for c in COUNTERS}


@dataclass
class Wave:
    index: int
    pods: int
    create_seconds: float = 0.0
    bound_seconds: float | None = None  # first create sent -> the daemon's counter says all bound
    cleanup_seconds: float | None = None  # delete sent -> Pods gone, no placeholder job holding
    cpu_bind: float = 0.0  # the daemon's CPU, first create -> all bound
    cpu_cleanup: float = 0.0  # ... delete sent -> clean
    counted: dict[str, int] = field(default_factory=dict)  # the counters' growth in this wave
    after: Sample | None = None  # the daemon once the wave was cleaned up
    jobs_listed: int = 0  # jobs in Slurm's list then (ended ones stay until MinJobAge)
    problems: list[str] = field(default_factory=list)

    @property
    def binds_per_second(self) -> float | None:
        return self.pods / self.bound_seconds if self.bound_seconds else None

    @property
    def cpu(self) -> float:
        return self.cpu_bind + self.cpu_cleanup


def pod_bodies(prefix: str, count: int, scheduler_name: str) -> list[dict[str, Any]]:
    return [
        loadgen.pod_body(
            f"{prefix}-{i:04d}", NAMESPACE, scheduler_name, labels=dict(LABEL),
            requests=dict(REQUESTS), grace=GRACE_SECONDS,
        )
        for i in range(count)
    ]  # fmt: skip


def check_wave(kube: Kube, api: SlurmRestApi, count: int) -> tuple[list[str], list[SlurmJob]]:
    """Every Pod of the wave bound, with one placeholder job each, RUNNING on the Slurm node
    its annotation names; problems are listed, not raised. Also Slurm's whole job list."""
    pods = kube.list("v1", "Pod", NAMESPACE, label_selector=SELECTOR).items
    listed = list(api.jobs().items)
    jobs: dict[str, list[SlurmJob]] = {}
    for job in listed:
        uid = pod_uid_of(job.name)
        if uid is not None:
            jobs.setdefault(uid, []).append(job)
    problems: list[str] = []
    if len(pods) != count:
        problems.append(f"{len(pods)} Pods listed, {count} created")
    unbound, wrong, doubled = [], [], []
    for pod in pods:
        meta, name = pod["metadata"], pod["metadata"]["name"]
        annotations = meta.get("annotations") or {}
        mine = jobs.get(meta["uid"], [])
        if len(mine) > 1:
            doubled.append(f"{name}: jobs {', '.join(str(j.job_id) for j in mine)}")
        if not (pod.get("spec") or {}).get("nodeName"):
            unbound.append(name)
            continue
        job_id, node = (
            annotations.get(wk.ANNOTATION_JOB_ID),
            annotations.get(wk.ANNOTATION_SLURM_NODE),
        )
        job = next((j for j in mine if str(j.job_id) == job_id), None)
        if job is None or job.state != "RUNNING" or job.nodes != node:
            said = f"job {job.job_id} {job.state} on {job.nodes!r}" if job else "no such job"
            wrong.append(f"{name} (job {job_id} on {node!r}): Slurm says {said}")
    for what, names in (("never bound", unbound), ("with two jobs", doubled),
                        ("not where their job runs", wrong)):  # fmt: skip
        if names:
            problems.append(f"{len(names)} Pods {what}, e.g. {'; '.join(names[:3])}")
    return problems, listed


def holding(listed: Iterable[SlurmJob]) -> list[SlurmJob]:
    """The placeholder jobs in LISTED that still hold (or wait for) resources."""
    return [j for j in listed if j.state in HOLDING and pod_uid_of(j.name)]


def run_wave(
    daemon: Daemon, kube: Kube, api: SlurmRestApi, index: int, count: int, creators: int,
    timeout: float,
) -> Wave:  # fmt: skip
    """Create COUNT Pods, wait until bound, check them, delete them, wait until clean."""
    wave = Wave(index, count)
    before = counters(daemon)
    bodies = pod_bodies(f"w{index:03d}", count, daemon.scheduler_name)
    cpu0, started = daemon.cpu_seconds(), time.monotonic()
    wave.create_seconds = loadgen.create_pods(
        kube, bodies, creators, lambda done, s: f"wave {index}: created {done} in {s:.1f} s", count
    )
    now: dict[str, int] = before

    def all_seen() -> bool:
        nonlocal now
        daemon.alive()
        now = counters(daemon)
        return (now["bound"] - before["bound"]) + (now["refused"] - before["refused"]) >= count

    if wait_until(all_seen, timeout, poll=0.25):
        wave.bound_seconds = time.monotonic() - started
    else:
        wave.problems.append(
            f"after {timeout:.0f} s the daemon had bound {now['bound'] - before['bound']} and "
            f"refused {now['refused'] - before['refused']} of {count}"
        )
    wave.cpu_bind = daemon.cpu_seconds() - cpu0
    problems, _ = check_wave(kube, api, count)
    wave.problems += problems
    cpu1, deleting = daemon.cpu_seconds(), time.monotonic()
    loadgen.delete_pods(kube, NAMESPACE, [b["metadata"]["name"] for b in bodies], creators, count)

    listed: list[SlurmJob] = []

    def clean() -> bool:
        nonlocal listed
        # The cheap lists first: the whole job list is large (see job_list_cost) and Slurm
        # lists a job COMPLETING (its script still ending) after its CPUs are free again.
        if kube.list("v1", "Pod", NAMESPACE, label_selector=SELECTOR).items:
            return False
        if sum(n.alloc_cpus for n in api.nodes().items):
            return False
        listed = list(api.jobs().items)
        return not holding(listed)

    if wait_until(clean, CLEANUP_TIMEOUT, poll=0.5):
        wave.cleanup_seconds = time.monotonic() - deleting
    else:
        left = holding(listed)
        wave.problems.append(
            f"{CLEANUP_TIMEOUT:.0f} s after the delete: Pods or allocations left, or "
            f"{len(left)} placeholder jobs still holding resources"
            + (f", e.g. job {left[0].job_id} {left[0].state}" if left else "")
        )
    wave.cpu_cleanup = daemon.cpu_seconds() - cpu1
    wave.jobs_listed = len(listed)
    after = counters(daemon)
    wave.counted = {c: after[c] - before[c] for c in COUNTERS}
    wave.after = sample(daemon.pid)
    return wave


def progress(wave: Wave, waves: int, total: int) -> str:
    rate = f"{wave.binds_per_second:.1f} binds/s" if wave.binds_per_second else "NOT all bound"
    after = wave.after
    memory = (
        f"VmRSS {after.rss / MIB:.1f} MiB, RssAnon {after.anon / MIB:.1f} MiB, {after.threads} "
        "threads"
        if after
        else ""
    )
    cleanup = f"{wave.cleanup_seconds:.1f} s" if wave.cleanup_seconds is not None else "NOT clean"
    problems = f"; PROBLEMS: {' | '.join(wave.problems)}" if wave.problems else ""
    if wave.jobs_listed > MAX_JOB_COUNT * 0.8:
        problems += f"; NEAR Slurm's MaxJobCount ({MAX_JOB_COUNT}): submits fail past it"
    return (
        f"wave {wave.index}/{waves}: {wave.counted.get('bound', 0)} bound ({total} in all), "
        f"{rate}, cleanup {cleanup}, daemon CPU {wave.cpu * 1000 / wave.pods:.1f} ms/Pod; "
        f"{memory}; {wave.jobs_listed} jobs in Slurm's list{problems}"
    )


def run_waves(
    daemon: Daemon,
    kube: Kube,
    api: SlurmRestApi,
    pods: int,
    size: int,
    creators: int,
    timeout: float,
    keep_going: Callable[[Wave], bool],
) -> list[Wave]:
    """Waves of SIZE until PODS have been bound (or KEEP_GOING says stop)."""
    waves: list[Wave] = []
    total, count = 0, -(-pods // size)
    for index in range(1, count + 1):
        wave = run_wave(daemon, kube, api, index, min(size, pods - (index - 1) * size), creators,
                        timeout)  # fmt: skip
        waves.append(wave)
        total += wave.counted.get("bound", 0)
        say(progress(wave, count, total))
        if not keep_going(wave):
            say(f"stopping after wave {index}: it did not finish")
            break
    return waves


@dataclass(frozen=True)
class SlurmEnd:
    holding: int  # placeholder jobs still holding (or waiting for) resources
    allocated_cpus: int  # summed over the nodes
    cpus: int
    jobs_listed: int


def slurm_at_end(api: SlurmRestApi) -> SlurmEnd:
    nodes, listed = api.nodes().items, api.jobs().items
    return SlurmEnd(
        len(holding(listed)),
        sum(n.alloc_cpus for n in nodes),
        sum(n.cpus for n in nodes),
        len(listed),
    )


@dataclass(frozen=True)
class ListCost:
    """One GET /jobs as the daemon's scheduler polls it, in this process under tracemalloc."""

    jobs: int
    seconds: float  # with tracemalloc on: slower than the daemon's
    peak: int  # bytes of Python objects at the peak, while the answer is parsed and decoded
    kept: int  # bytes still held by the decoded list
    json_bytes: int  # the answer as compact JSON
    loads_peak: int  # bytes of Python objects json.loads alone makes of that JSON
    largest: tuple[tuple[str, int], ...]  # a placeholder job's largest fields, JSON bytes


def job_list_cost(api: SlurmRestApi, url: str, tokens: TokenSource) -> ListCost:
    """What Slurm's whole job list (ended jobs stay in it until MinJobAge) costs to read:
    through the client, as the scheduler's poll reads it, then once more raw for its size."""
    tracemalloc.start()
    try:
        started = time.monotonic()
        listed = api.jobs()
        seconds = time.monotonic() - started
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    transport = Transport(url, tokens, timeout=120.0)
    try:
        body = transport.request("GET", f"{codec_for(api.api_version).base}/jobs/").body
    finally:
        transport.close()
    text = json.dumps(body, separators=(",", ":"))
    del body
    tracemalloc.start()
    try:
        body = json.loads(text)
        _, loads_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    jobs = [j for j in body.get("jobs") or () if pod_uid_of(str(j.get("name", "")))]
    fields = sorted(((k, _json_size(v)) for k, v in (jobs[0] if jobs else {}).items()),
                    key=lambda kv: -kv[1])  # fmt: skip
    return ListCost(
        len(listed.items), seconds, peak, kept, len(text), loads_peak, tuple(fields[:3])
    )


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))
