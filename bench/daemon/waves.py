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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.daemon.process import Daemon
from bench.harness import loadgen
from bench.harness.procs import MIB, Sample, sample
from bench.harness.report import say
from bench.harness.timing import wait_until
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.jwt import TokenSource
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.adapters.slurm.transport import LISTING_LIMITS, AnswerLimits, Transport
from reconciler.adapters.slurm.versions import codec_for
from reconciler.scheduler.decide.placeholder import pod_uid_of
from reconciler.scheduler.decide.pod_decide import ACTIVE_STATES

NAMESPACE = "bench"  # bench/fixtures/scheduler-repo's scheduler.scope.namespaces
CLUSTER_CPUS = 512  # that repo's 4 Slurm nodes x 128 CPUs: one per Pod at the most
LABEL = {"app.kubernetes.io/name": "daemon-scale-bench"}
SELECTOR = "app.kubernetes.io/name=daemon-scale-bench"
REQUESTS = {"cpu": "100m", "memory": "100Mi"}  # admission rounds these up to 1 CPU, 100 MB
GRACE_SECONDS = 5
CLEANUP_TIMEOUT = 300.0
# Jobs in these states hold (or wait for) resources; COMPLETING is Slurm ending one.
HOLDING = ACTIVE_STATES | {"COMPLETING"}
CHECKERS = 8  # GETs of single jobs in flight while a wave is checked
MAX_JOB_COUNT = 10000  # Slurm's default; the repo leaves it, and MinJobAge (300 s), alone
COUNTERS = ("bound", "refused", "submitted", "jobs_cancelled", "pods_deleted")


# The scheduler's slurmrestd requests by operation (its clients' observer, on /metrics).
REQUESTS_METRIC = 'reconciler_slurm_request_seconds_count{operation="'
# Operations that read Slurm's whole job list (SlurmRestClient): none is wanted after start.
WHOLE_LIST_READS = ("jobs", "jobs_where", "job_summaries")
# The daemon's Slurm metrics reader (a client of its own, not in the requests above): whether
# its last read took the whole job list (1) or counted jobs per state (0), and how it stands.
READER_SERIES = {
    "job_detail": "reconciler_slurm_metrics_job_detail",
    "age": "reconciler_slurm_snapshot_age_seconds",
    "read": "reconciler_slurm_snapshot_read_seconds",
    "failures": "reconciler_slurm_snapshot_failures_total",
}


def counters(daemon: Daemon) -> dict[str, int]:
    """The daemon's scheduler counters (COUNTERS) and its slurmrestd requests by operation
    (`slurm:<operation>`), from its /metrics."""
    values = daemon.metrics()
    found = {c: int(values.get(f"reconciler_scheduler_{c}_total", 0)) for c in COUNTERS}
    for name, value in values.items():
        if name.startswith(REQUESTS_METRIC):
            found["slurm:" + name[len(REQUESTS_METRIC) :].split('"', 1)[0]] = int(value)
    return found


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
    reader: dict[str, float] = field(default_factory=dict)  # READER_SERIES then, by key
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


def check_wave(kube: Kube, api: SlurmRestApi, count: int) -> list[str]:
    """Every Pod of the wave bound, its job (the annotation's) its own placeholder, RUNNING on
    the Slurm node the annotation names; problems are listed, not raised. Each job is read by
    itself (CHECKERS at a time): the benchmark reads no whole job list while the daemon runs
    (at 3,500 jobs one is 44 MB of JSON, and slurmrestd restarted under it). A Pod with two
    jobs shows in the daemon's counters instead: placeholder jobs submitted against bound."""
    pods = kube.list("v1", "Pod", NAMESPACE, label_selector=SELECTOR).items
    problems: list[str] = []
    if len(pods) != count:
        problems.append(f"{len(pods)} Pods listed, {count} created")
    unbound = [p["metadata"]["name"] for p in pods if not (p.get("spec") or {}).get("nodeName")]
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    with ThreadPoolExecutor(CHECKERS) as pool:
        wrong = [w for w in pool.map(lambda pod: _wrong(api, pod), bound) if w]
    for what, names in (("never bound", unbound), ("not where their job runs", wrong)):
        if names:
            problems.append(f"{len(names)} Pods {what}, e.g. {'; '.join(names[:3])}")
    return problems


def _wrong(api: SlurmRestApi, pod: dict[str, Any]) -> str:
    """'' when the Pod's job is its own placeholder, RUNNING where its annotation says."""
    meta = pod["metadata"]
    annotations = meta.get("annotations") or {}
    job_id, node = annotations.get(wk.ANNOTATION_JOB_ID), annotations.get(wk.ANNOTATION_SLURM_NODE)
    job = api.job(int(job_id)) if job_id and job_id.isdigit() else None
    if (
        job is None
        or job.state != "RUNNING"
        or job.nodes != node
        or (pod_uid_of(job.name) != meta["uid"])
    ):
        said = f"job {job.job_id} {job.state} on {job.nodes!r}" if job else "no such job"
        return f"{meta['name']} (job {job_id} on {node!r}): Slurm says {said}"
    return ""


def holding(states: dict[int, str]) -> list[int]:
    """The jobs that still hold (or wait for) resources. Only the daemon submits jobs on the
    benchmark's stack, so every job is a placeholder: the state list (ids and states) says it,
    where the whole list would cost megabytes."""
    return [job_id for job_id, state in states.items() if state in HOLDING]


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
        """Every Pod bound, refused, or deleted by the scheduler (its placeholder job ended
        before the bind: a check below reports it, the wave does not wait for it)."""
        nonlocal now
        daemon.alive()
        now = counters(daemon)
        return sum(now[c] - before[c] for c in ("bound", "refused", "pods_deleted")) >= count

    if wait_until(all_seen, timeout, poll=0.25):
        wave.bound_seconds = time.monotonic() - started
    else:
        wave.problems.append(
            f"after {timeout:.0f} s the daemon had bound {now['bound'] - before['bound']} and "
            f"refused {now['refused'] - before['refused']} of {count}"
        )
    wave.cpu_bind = daemon.cpu_seconds() - cpu0
    deleted = now["pods_deleted"] - before["pods_deleted"]
    if deleted:
        wave.problems.append(
            f"the scheduler deleted {deleted} Pods of the wave: their placeholder job ended "
            "(its Event says why)"
        )
    wave.problems += check_wave(kube, api, count)
    cpu1, deleting = daemon.cpu_seconds(), time.monotonic()
    loadgen.delete_pods(kube, NAMESPACE, [b["metadata"]["name"] for b in bodies], creators, count)

    states: dict[int, str] = {}

    def clean() -> bool:
        nonlocal states
        # Slurm lists a job COMPLETING (its script still ending) after its CPUs are free again.
        if kube.list("v1", "Pod", NAMESPACE, label_selector=SELECTOR).items:
            return False
        if sum(n.alloc_cpus for n in api.nodes().items):
            return False
        states = api.job_states()
        return not holding(states)

    if wait_until(clean, CLEANUP_TIMEOUT, poll=0.5):
        wave.cleanup_seconds = time.monotonic() - deleting
    else:
        left = holding(states)
        wave.problems.append(
            f"{CLEANUP_TIMEOUT:.0f} s after the delete: Pods or allocations left, or "
            f"{len(left)} placeholder jobs still holding resources"
            + (f", e.g. job {left[0]} {states[left[0]]}" if left else "")
        )
    wave.cpu_cleanup = daemon.cpu_seconds() - cpu1
    wave.jobs_listed = len(states)
    after = counters(daemon)
    wave.counted = {c: after[c] - before.get(c, 0) for c in after}
    wave.after = sample(daemon.pid)
    values = daemon.metrics()
    wave.reader = {key: values[name] for key, name in READER_SERIES.items() if name in values}
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


def daemon_restarts(local_up_log: Path) -> list[str]:
    """The node agent's lines for a Pod's daemon that exited and was started again
    (slurmctld, slurmrestd, a slurmd): none is wanted during the waves."""
    text = local_up_log.read_text(errors="replace") if local_up_log.exists() else ""
    return [line for line in text.splitlines() if "a daemon exited" in line]


@dataclass(frozen=True)
class SlurmEnd:
    holding: int  # placeholder jobs still holding (or waiting for) resources
    allocated_cpus: int  # summed over the nodes
    cpus: int
    jobs_listed: int


def slurm_at_end(api: SlurmRestApi) -> SlurmEnd:
    nodes, states = api.nodes().items, api.job_states()
    return SlurmEnd(
        len(holding(states)),
        sum(n.alloc_cpus for n in nodes),
        sum(n.cpus for n in nodes),
        len(states),
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
    # Read whole on purpose, to size it: the daemon reads no list so (slurmrestd indents its
    # JSON, 266 MB for 7,262 jobs, past the cap for an answer read whole).
    whole = AnswerLimits(answer=LISTING_LIMITS)
    transport = Transport(url, tokens, timeout=120.0, limits=whole)
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
