"""Chaos benchmark: Pods stream through the scheduler while its world breaks.

Not a test: run it by hand from the repo root and read the figures.

    python -m bench.chaos                  # 500 Pods at 2/s with every fault (about 6 min)
    python -m bench.chaos --pods 60 --rate 2 --kills 4   # a quick look (say so when quoted)

On a local stack of its own (`reconciler local up`, name bench-chaos, from
bench/fixtures/chaos-repo: 4 Slurm nodes of 128 CPUs, accounting on), two replicas of
`reconciler run --runtime-dir ... --leader-elect` talk to slurmrestd through
bench/faults/proxy.py (`--slurm-url`); a replica that exits is started again after 1 s, as
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
import os
import random
import statistics
import sys
import threading
import time

if __package__ in (None, ""):  # `python bench/chaos.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.faults.common import POD_NAMESPACE, RECOVERY_TARGET, REPO, STACK_NAME, UID, say
from bench.faults.faults import Chaos, Fault, schedule
from bench.faults.pods import Ledger, delete_pod, stream, watch_pods
from bench.faults.proxy import FaultProxy
from bench.faults.replicas import Replica, keep_running, make_replica, route_to_ready
from bench.harness.stack import start_local_up, stop_local_up
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import default_runtime_dir

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
