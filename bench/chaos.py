"""Chaos benchmark: Pods stream through the scheduler while its world breaks.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.chaos                  # 500 Pods at 2/s with every fault (about 6 min)
    python -m bench.chaos --pods 60 --rate 2 --kills 4   # a quick look (say so when quoted)

On a local stack of its own (`reconciler local up`, name bench-chaos, from
bench/fixtures/chaos-repo: 4 Slurm nodes of 128 CPUs, accounting on), two replicas of
`reconciler run --runtime-dir ... --leader-elect` talk to slurmrestd through
bench/fault_proxy.py (`--slurm-url`); a replica that exits is started again after 1 s, as
kubelet restarts a Pod's container (a leader that loses its lease exits on purpose), on the same
ports. Placeholder jobs reach the hooks API through a stand-in for its Service: a proxy to the
replica whose /readyz answers 200 (only the leader's does), polled every 0.2 s. A stream of
--pods Pods is created at --rate Pods/s (every --gang-every-th creation a gang of 2), each
deleted a few seconds after it is bound; plain `sbatch` jobs run beside them. Meanwhile, one
fault at a time, in a shuffled order:

- kill -9 of the leader (--kills times), restarted at once as kubelet would;
- `kubectl rollout restart` of the controller Deployment (--ctld-restarts times);
- kube-apiserver stopped for 5 s and started again (--apiserver-restarts times; on the last,
  etcd is compacted while it is down, so every watch must relist);
- slurmrestd answering 500s and malformed 200s for --rest-fault seconds;
- the leader paused (SIGSTOP) past its lease while the other replica runs, then resumed.

After each fault a probe Pod is created: recovery is the fault's end to that Pod bound. At the
end every Pod is deleted and the benchmark waits for the placeholder jobs to end, then reads
Slurm's accounting. Reported: Pods bound; duplicate jobs (a Pod UID with more than one
placeholder job); orphan jobs (placeholder jobs alive 60 s after every Pod is gone); Pods
deleted by anyone but the benchmark; jobs killed (plain jobs that did not complete); recovery
per fault. Targets: 0, 0, 0, 0 and recovery < 10 s.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/chaos.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.fault_proxy import FaultProxy
from bench.harness.stack import start_local_up, stop_local_up
from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.apply.controller import roll_deployment
from reconciler.errors import ReconcilerError
from reconciler.local import kube as kube_module
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack, default_runtime_dir

ROOT = Path(__file__).resolve().parent.parent
REPO = ROOT / "bench" / "fixtures" / "chaos-repo"
STACK_NAME = "bench-chaos"
NAMESPACE, POD_NAMESPACE, RELEASE = "slurm", "bench", "bench"
SCHEDULER = f"{NAMESPACE}-{RELEASE}-slurm-scheduler"
LEASE = f"{RELEASE}-reconciler"
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RECOVERY_TARGET = 10.0


def say(text: str) -> None:
    print(f"chaos {datetime.now(UTC):%H:%M:%S.%f}"[:-3] + f": {text}", file=sys.stderr,
          flush=True)  # fmt: skip


# ---- the daemon's replicas -------------------------------------------------------------


@dataclass
class Replica:
    identity: str
    argv: list[str]
    log: Path
    listen_port: int
    hooks_port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=ROOT, start_new_session=True)  # fmt: skip
        self.starts += 1

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def stop(self) -> None:
        if self.process is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def make_replica(stack: LocalStack, identity: str, proxy_url: str, hooks_url: str,
                 work: Path) -> Replica:  # fmt: skip
    """`reconciler run` on the stack, its slurmrestd reached through the fault proxy. Its ports
    stay the same across restarts, as a Pod's do; placeholder jobs reach the hooks API at
    hooks_url, the stand-in for the Service in front of the ready replica."""
    listen, hooks = free_port(), free_port()
    argv = [
        sys.executable, "-m", "reconciler", "run", "--source-dir", str(REPO),
        "--runtime-dir", str(stack.runtime_dir), "--slurm-url", proxy_url,
        "--leader-elect", "--identity", identity, "--lease-duration", "6",
        "--listen", f"127.0.0.1:{listen}", "--hooks-api-bind-address", f"127.0.0.1:{hooks}",
        "--hooks-url", hooks_url,
        "--interval", "5", "--resync", "60", "--workdir", str(work / identity),
        "--log-format", "json",
    ]  # fmt: skip
    return Replica(identity, argv, work / f"{identity}.log", listen, hooks)


def ready(replica: Replica) -> bool:
    url = f"http://127.0.0.1:{replica.listen_port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def route_to_ready(replicas: dict[str, Replica], service: FaultProxy,
                   stop: threading.Event) -> None:  # fmt: skip
    """The hooks Service's endpoints: the replica whose /readyz says 200 (only a leader does)."""
    current: Replica | None = None
    while not stop.wait(0.2):
        if current is not None and ready(current):
            continue
        current = next((r for r in replicas.values() if ready(r)), None)
        service.retarget(f"http://127.0.0.1:{current.hooks_port}" if current else None)


def keep_running(replicas: dict[str, Replica], stop: threading.Event) -> None:
    """kubelet's restartPolicy Always for the replicas: one that exited starts again in 1 s."""
    while not stop.wait(0.5):
        for replica in replicas.values():
            if replica.process is not None and replica.process.poll() is not None:
                time.sleep(1.0)
                if not stop.is_set():
                    replica.start()


def leader(kube: Kube) -> str | None:
    lease = kube.get("coordination.k8s.io/v1", "Lease", LEASE, NAMESPACE) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


# ---- Pods: the stream, and what happened to each ----------------------------------------


@dataclass
class PodRecord:
    name: str
    uid: str = ""
    created: float = 0.0
    bound: float | None = None
    deleted_by_us: bool = False
    gone: float | None = None


@dataclass
class Ledger:
    """Every Pod of the run, as the benchmark's own watch saw it."""

    pods: dict[str, PodRecord] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str) -> PodRecord:
        with self.lock:
            return self.pods.setdefault(name, PodRecord(name))

    def wrongful(self) -> list[str]:
        with self.lock:
            return sorted(p.name for p in self.pods.values() if p.gone and not p.deleted_by_us)


def pod_body(name: str, group: str = "") -> dict[str, Any]:
    annotations = {wk.ANNOTATION_POD_GROUP: group, wk.ANNOTATION_POD_GROUP_MIN_MEMBER: "2"} \
        if group else {}  # fmt: skip
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": POD_NAMESPACE, "annotations": annotations},
        "spec": {
            "schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1d"],
                            "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}],
        },
    }  # fmt: skip


def watch_pods(kube: Kube, ledger: Ledger, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            for kind, pod in kube.watch("v1", "Pod", POD_NAMESPACE, timeout_seconds=30):
                record = ledger.record(pod["metadata"]["name"])
                record.uid = record.uid or pod["metadata"].get("uid", "")
                if kind == "DELETED" and record.gone is None:
                    record.gone = time.monotonic()
                elif (pod.get("spec") or {}).get("nodeName") and record.bound is None:
                    record.bound = time.monotonic()
                if stop.is_set():
                    return
        except ReconcilerError:
            time.sleep(0.5)  # the API server is down (a fault): watch again


def delete_pod(kube: Kube, ledger: Ledger, name: str) -> None:
    ledger.record(name).deleted_by_us = True
    for _ in range(60):
        try:
            kube.delete("v1", "Pod", name, POD_NAMESPACE)
            return
        except ReconcilerError:
            time.sleep(1)  # the API server is down: try again


def create_pod(kube: Kube, ledger: Ledger, body: dict[str, Any]) -> None:
    record = ledger.record(body["metadata"]["name"])
    record.created = time.monotonic()
    for _ in range(60):
        try:
            kube.request_json("POST", f"/api/v1/namespaces/{POD_NAMESPACE}/pods", body=body)
            return
        except ReconcilerError as error:
            if "already exists" in str(error):
                return
            time.sleep(1)


def stream(kube: Kube, ledger: Ledger, options: argparse.Namespace, done: threading.Event,
           rng: random.Random) -> None:  # fmt: skip
    """Create --pods Pods at --rate; delete each group a few seconds after it is bound."""
    made, index = 0, 0
    live: list[tuple[list[str], float | None]] = []  # (names, delete at)
    next_at = time.monotonic()
    while made < options.pods or live:
        now = time.monotonic()
        if made < options.pods and now >= next_at:
            index += 1
            gang = options.gang_every and index % options.gang_every == 0
            names = [f"g{index}-{m}" for m in range(2)] if gang else [f"p{index}"]
            for name in names:
                create_pod(kube, ledger, pod_body(name, f"g{index}" if gang else ""))
            made += len(names)
            live.append((names, None))
            next_at += len(names) / options.rate
        kept = []
        for names, delete_at in live:
            bound = all(ledger.record(n).bound for n in names)
            if delete_at is None and bound:
                delete_at = now + rng.uniform(2.0, 8.0)
            if delete_at is not None and now >= delete_at:
                for name in names:
                    delete_pod(kube, ledger, name)
            else:
                kept.append((names, delete_at))
        live = kept
        time.sleep(0.05)
    done.set()


# ---- plain Slurm jobs beside the Pods ------------------------------------------------------


def plain_jobs(stack: LocalStack, ids: list[str], stop: threading.Event) -> None:
    slurm = stack.slurm
    assert slurm is not None
    while not stop.wait(10.0):
        try:
            out = slurm.run("sbatch", "--parsable", "-J", "chaos-plain", "-o", "/dev/null",
                            "--wrap", "sleep 20")  # fmt: skip
            ids.append(out.strip().split(";")[0])
        except ReconcilerError:
            continue  # slurmctld restarting (a fault): the next one goes


# ---- faults ------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    started: float = 0.0
    ended: float = 0.0
    recovery: float | None = None
    note: str = ""


class Chaos:
    def __init__(
        self, stack: LocalStack, kube: Kube, replicas: dict[str, Replica], proxy: FaultProxy,
        ledger: Ledger, options: argparse.Namespace,
    ) -> None:  # fmt: skip
        self.stack, self.kube, self.replicas = stack, kube, replicas
        self.proxy, self.ledger, self.options = proxy, ledger, options
        self.probes = 0

    def leader_replica(self) -> Replica | None:
        holder = leader(self.kube)
        return self.replicas.get(holder or "")

    def run(self, fault: Fault) -> None:
        fault.started = time.monotonic()
        getattr(self, f"_{fault.kind}")(fault)
        fault.ended = time.monotonic()
        fault.recovery = self.probe()

    def _kill(self, fault: Fault) -> None:
        victim = self.leader_replica()
        if victim is None:
            fault.note = "no leader"
            return
        victim.signal(signal.SIGKILL)  # keep_running starts it again, as kubelet would
        fault.note = victim.identity

    def _ctld(self, fault: Fault) -> None:
        roll_deployment(self.kube, NAMESPACE, f"{RELEASE}-controller", datetime.now(UTC))

    def _apiserver(self, fault: Fault) -> None:
        plane = self.stack.kube
        assert plane is not None
        plane.supervisor.stop("kube-apiserver", grace=10)
        if fault.note == "compact":
            compact_etcd(plane.ports.etcd_client)
        time.sleep(5)
        plane.supervisor.start("kube-apiserver", kube_module.apiserver_argv(
            plane.binaries, plane.paths, plane.ports))  # fmt: skip
        token = kube_module.read_token(plane.paths)
        plane.supervisor.wait_ready("kube-apiserver", lambda: kube_module.apiserver_ready(
            plane.paths, plane.ports, token), timeout=60)  # fmt: skip

    def _rest(self, fault: Fault) -> None:
        self.proxy.mode = "broken"
        time.sleep(self.options.rest_fault)
        self.proxy.mode = "ok"
        fault.note = f"{self.proxy.broken_answers} broken answers"

    def _pause(self, fault: Fault) -> None:
        victim = self.leader_replica()
        if victim is None:
            fault.note = "no leader"
            return
        victim.signal(signal.SIGSTOP)
        time.sleep(6 + 4)  # the lease, and then some
        fault.note = f"{victim.identity} paused; leader meanwhile: {leader(self.kube)}"
        victim.signal(signal.SIGCONT)

    def probe(self) -> float | None:
        """Seconds from now until a new Pod is bound (None: not within 60 s)."""
        self.probes += 1
        name = f"probe-{self.probes}"
        started = time.monotonic()
        create_pod(self.kube, self.ledger, pod_body(name))
        deadline = started + 60
        while time.monotonic() < deadline:
            if self.ledger.record(name).bound:
                recovery = self.ledger.record(name).bound - started  # type: ignore[operator]
                delete_pod(self.kube, self.ledger, name)
                return recovery
            time.sleep(0.05)
        delete_pod(self.kube, self.ledger, name)
        return None


def compact_etcd(port: int) -> None:
    """Compact etcd to its current revision (through its JSON gateway): every watch that
    resumes from before it gets 410 Gone and must relist."""

    def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         data=json.dumps(body).encode())  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    key = base64.b64encode(b"/registry").decode()
    revision = int(call("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    call("/v3/kv/compaction", {"revision": revision, "physical": True})


def schedule(options: argparse.Namespace, rng: random.Random) -> list[Fault]:
    faults = [Fault("kill") for _ in range(options.kills)]
    faults += [Fault("ctld") for _ in range(options.ctld_restarts)]
    faults += [Fault("apiserver") for _ in range(options.apiserver_restarts)]
    faults += [Fault("rest"), Fault("pause")]
    rng.shuffle(faults)
    apiservers = [f for f in faults if f.kind == "apiserver"]
    if apiservers:
        apiservers[-1].note = "compact"
    return faults


# ---- the end: what Slurm says happened -------------------------------------------------------


def sacct_jobs(stack: LocalStack) -> list[tuple[str, str, str]]:
    """(job id, name, state) of every job of the run, from accounting."""
    slurm = stack.slurm
    assert slurm is not None
    out = slurm.run("sacct", "-a", "-X", "-n", "-P", "-S", "now-2hours",
                    "-o", "JobID,JobName%200,State")  # fmt: skip
    return [tuple(line.split("|")[:3]) for line in out.splitlines() if line]  # type: ignore[misc]


def live_placeholders(stack: LocalStack) -> list[str]:
    slurm = stack.slurm
    assert slurm is not None
    out = slurm.run("squeue", "-h", "-o", "%i %j", check=False)
    return [line for line in out.splitlines() if UID.search(line)]


def report(faults: list[Fault], ledger: Ledger, jobs: list[tuple[str, str, str]],
           plain: list[str], orphans: list[str], seconds: float) -> bool:  # fmt: skip
    per_uid: dict[str, int] = {}
    for _, name, _ in jobs:
        found = UID.search(name)
        if found:
            per_uid[found.group()] = per_uid.get(found.group(), 0) + 1
    duplicates = {uid: n for uid, n in per_uid.items() if n > 1}
    states = {job: state for job, _, state in jobs}
    killed = [job for job in plain if states.get(job, "?") not in ("COMPLETED", "RUNNING",
                                                                  "PENDING")]  # fmt: skip
    bound = sum(1 for p in ledger.pods.values() if p.bound)
    wrongful = ledger.wrongful()
    print(f"\nchaos run: {seconds:.0f} s, {len(ledger.pods)} Pods created, {bound} bound")
    print(f"{'fault':<12} {'count':>5}  {'recovery p50':>12} {'max':>8}  notes")
    for kind in ("kill", "ctld", "apiserver", "rest", "pause"):
        mine = [f for f in faults if f.kind == kind]
        if not mine:
            continue
        times = [f.recovery for f in mine if f.recovery is not None]
        missed = len(mine) - len(times)
        p50 = f"{statistics.median(times):.2f} s" if times else "-"
        worst = f"{max(times):.2f} s" if times else "-"
        notes = "; ".join(sorted({f.note for f in mine if f.note and kind != "kill"}))
        extra = f" ({missed} not recovered in 60 s)" if missed else ""
        print(f"{kind:<12} {len(mine):>5}  {p50:>12} {worst:>8}  {notes}{extra}")
    rows = [
        ("duplicate jobs (a Pod UID with more than one job)", len(duplicates), 0),
        ("orphan jobs (alive 60 s after their Pods)", len(orphans), 0),
        ("Pods deleted by someone else", len(wrongful), 0),
        (f"plain jobs killed (of {len(plain)})", len(killed), 0),
    ]
    times = [f.recovery for f in faults if f.recovery is not None]
    slow = [f for f in faults if f.recovery is None or f.recovery >= RECOVERY_TARGET]
    print()
    for label, value, target in rows:
        print(f"  {label:<52} {value:>5}  {'MET' if value <= target else 'MISSED'}")
    worst = max(times) if times else float("nan")
    print(f"  {'recovery, worst (target < 10 s)':<52} {worst:>5.1f}  "
          f"{'MET' if not slow else 'MISSED'}")  # fmt: skip
    for uid, n in sorted(duplicates.items())[:5]:
        print(f"    duplicate: Pod uid {uid}: {n} jobs")
    for name in wrongful[:5]:
        print(f"    deleted by someone else: {name}")
    for job in killed[:5]:
        print(f"    plain job {job}: {states.get(job)}")
    for line in orphans[:5]:
        print(f"    orphan: {line}")
    return not (duplicates or orphans or wrongful or killed or slow)


# ---- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--rate", type=float, default=2.0, help="Pods created per second")
    parser.add_argument("--gang-every", type=int, default=10, help="every Nth creation a gang")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--ctld-restarts", type=int, default=3)
    parser.add_argument("--apiserver-restarts", type=int, default=3)
    parser.add_argument("--rest-fault", type=float, default=10.0, help="seconds of bad answers")
    parser.add_argument("--seed", type=int, default=17)
    options = parser.parse_args(argv)
    rng = random.Random(options.seed)
    runtime = default_runtime_dir(STACK_NAME)
    work = runtime.parent / f"{STACK_NAME}-work"
    work.mkdir(parents=True, exist_ok=True)
    say(f"starting the local stack in {runtime}")
    up = start_local_up(REPO, runtime, ["--name", STACK_NAME], work / "up.log",
                        timeout=240, stop_timeout=90)  # fmt: skip
    replicas: dict[str, Replica] = {}
    proxy: FaultProxy | None = None
    service: FaultProxy | None = None
    stop = threading.Event()
    try:
        stack = LocalStack.open(runtime)
        kube = Kube.from_kubeconfig(stack.kube_paths.kubeconfig, field_manager="chaos-bench")
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POD_NAMESPACE}})
        slurm = stack.slurm
        assert slurm is not None
        proxy = FaultProxy(slurm.rest_url())
        proxy.start()
        service = FaultProxy(None)
        service.start()
        for identity in ("chaos-a", "chaos-b"):
            replicas[identity] = make_replica(stack, identity, proxy.url, service.url, work)
            replicas[identity].start()
        threading.Thread(target=keep_running, args=(replicas, stop), daemon=True).start()
        threading.Thread(target=route_to_ready, args=(replicas, service, stop),
                         daemon=True).start()  # fmt: skip
        ledger = Ledger()
        threading.Thread(target=watch_pods, args=(kube, ledger, stop), daemon=True).start()
        chaos = Chaos(stack, kube, replicas, proxy, ledger, options)
        say("waiting for a leader and a first Pod bound")
        first = chaos.probe()
        if first is None:
            raise SystemExit("no Pod was bound within 60 s: see " + str(work))
        faults = schedule(options, rng)
        plain: list[str] = []
        threading.Thread(target=plain_jobs, args=(stack, plain, stop), daemon=True).start()
        done = threading.Event()
        started = time.monotonic()
        threading.Thread(target=stream, args=(kube, ledger, options, done, rng),
                         daemon=True).start()  # fmt: skip
        spacing = options.pods / options.rate / (len(faults) + 1)
        for number, fault in enumerate(faults, 1):
            time.sleep(rng.uniform(0.5, 1.5) * spacing)
            say(f"fault {number}/{len(faults)}: {fault.kind}")
            chaos.run(fault)
            say(f"  recovered in {fault.recovery:.2f} s" if fault.recovery is not None
                else "  not recovered within 60 s")  # fmt: skip
        done.wait()
        seconds = time.monotonic() - started
        stop.set()
        say("every Pod deleted; waiting for their jobs to end")
        for record in list(ledger.pods.values()):
            if record.gone is None:
                delete_pod(kube, ledger, record.name)
        deadline = time.monotonic() + 60
        while live_placeholders(stack) and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(5)  # the last plain jobs end, accounting catches up
        ok = report(faults, ledger, sacct_jobs(stack), plain, live_placeholders(stack), seconds)
        return 0 if ok else 1
    finally:
        stop.set()
        for replica in replicas.values():
            replica.stop()
        for server in (proxy, service):
            if server is not None:
                server.stop()
        say("stopping the local stack")
        stop_local_up(runtime, up, timeout=90)
        say(f"logs of the replicas and the stack: {work}")


if __name__ == "__main__":
    sys.exit(main())
