"""The probes of every long-running container we render, and why each detects what it does
(docs/rendered-pods.md#probes says the same for users).

- Readiness says when a daemon takes work (a Service sends to it; `apply` waits for it).
- Liveness restarts a daemon that no longer does its job. It must fail on a hung daemon, not
  on a busy one: an RPC the daemon answers without taking its big locks, a timeout longer than
  Slurm's own MessageTimeout (10 s), and minutes of failures before the restart.
- Startup holds liveness off while a daemon starts (slurmctld recovering its state, MariaDB
  making its first database), so a slow start is never a restart loop.

A tcpSocket check passes while the kernel accepts connections on the port, even if the daemon
never reads them: it is used where the daemon's failure is its exit or a closed port, and an
RPC check where a hang must be caught (slurmctld, slurmd, munged, MariaDB).
"""

from __future__ import annotations

from reconciler.objects import Obj

# Longer than Slurm's MessageTimeout (10 s), so a slow answer is not a failure.
RPC_TIMEOUT = 15


def _tcp(port: int, **timing: int) -> Obj:
    return {"tcpSocket": {"port": port}, **timing}


def _exec(command: list[str], **timing: int) -> Obj:
    # A copy: one list in two probes would be one YAML anchor in the rendered output.
    return {"exec": {"command": list(command)}, "timeoutSeconds": RPC_TIMEOUT, **timing}


def slurmctld(port: int) -> Obj:
    """`scontrol ping` is an RPC slurmctld answers without its state locks: it fails (exit 1,
    "DOWN") when slurmctld accepts but answers nothing, as 24.11 hung in `Attempting to
    reconfigure` did for ten minutes on our local stack. Two minutes of that restart it; the state
    is on its claim, and running jobs go on (SUNK's "About SUNK": a failing slurmctld is restarted).
    Startup allows five minutes to recover a large state directory."""
    return {
        "startupProbe": _tcp(port, periodSeconds=10, failureThreshold=30),
        "readinessProbe": _tcp(port, periodSeconds=10),
        "livenessProbe": _exec(["scontrol", "ping"], periodSeconds=20, failureThreshold=6),
    }


def slurmd() -> Obj:
    """Ready once slurmd answers `scontrol show slurmd`, an RPC to the slurmd of this host (its
    name is the Pod's; slurmd then registers with slurmctld), and alive while it does: a
    wedged slurmd stops answering it, and slurmctld would mark the node DOWN after
    SlurmdTimeout anyway. Never a bare TCP connect: slurmd logs each as an error ("Zero Bytes
    were transmitted or received"), seen every 10 s on a kubelet. Jobs are slurmstepd's, not
    slurmd's: restarting slurmd does not end them. The image runs the Pod's s6 oneshots
    (compute.s6) before slurmd, which may install software: startup allows ten minutes."""
    show = ["scontrol", "show", "slurmd"]
    return {
        "startupProbe": _exec(show, periodSeconds=10, failureThreshold=60),
        "readinessProbe": _exec(show, periodSeconds=10),
        "livenessProbe": _exec(show, periodSeconds=30, failureThreshold=4),
    }


def slurmrestd(port: int) -> Obj:
    """slurmrestd holds no state and every answer needs slurmctld: an RPC check would restart
    it for slurmctld's failures (its 504s), which a restart does not mend. The port closing
    is its own failure."""
    return {
        "readinessProbe": _tcp(port, periodSeconds=10),
        "livenessProbe": _tcp(port, periodSeconds=20, failureThreshold=3),
    }


def slurmdbd(port: int) -> Obj:
    """slurmdbd listens once it reached its database; slurmctld keeps accounting records while
    it is away, so only a closed port for a minute restarts it."""
    return {
        "startupProbe": _tcp(port, periodSeconds=10, failureThreshold=30),
        "readinessProbe": _tcp(port, periodSeconds=10),
        "livenessProbe": _tcp(port, periodSeconds=20, failureThreshold=3),
    }


def mariadb(port: int) -> Obj:
    """`mariadb-admin ping` answers 0 from a server that completes a handshake (even one that
    refuses the user): it fails on a server that accepts and hangs. The first start makes the
    database (minutes on a slow disk): startup allows ten."""
    ping = ["mariadb-admin", "ping", "--host=127.0.0.1", f"--port={port}"]
    return {
        "startupProbe": _tcp(port, periodSeconds=10, failureThreshold=60),
        "readinessProbe": _tcp(port, periodSeconds=10),
        "livenessProbe": _exec(ping, periodSeconds=20, failureThreshold=6),
    }


def sshd(port: int) -> Obj:
    """sshd forks a process per connection: its listener closing is its failure."""
    return {
        "readinessProbe": _tcp(port, periodSeconds=10),
        "livenessProbe": _tcp(port, periodSeconds=20, failureThreshold=3),
    }


def munged(socket: str) -> Obj:
    """`munge -n` asks munged for a credential over its socket: it fails when munged is gone
    or hung, and every Slurm RPC of the Pod would fail with it."""
    encode = ["munge", "-n", f"--socket={socket}", "--output=/dev/null"]
    return {
        "readinessProbe": _exec(encode, periodSeconds=10),
        "livenessProbe": _exec(encode, periodSeconds=20, failureThreshold=3),
    }


def sssd(readiness: str, socket: str) -> Obj:
    """Ready when the directory's canary users resolve (readiness). Alive while its NSS
    responder's socket is there: a directory that is away is not sssd's failure, and
    restarting sssd for it would only drop its cache."""
    return {
        "readinessProbe": {"exec": {"command": ["sh", "-c", readiness]}, "periodSeconds": 10},
        "livenessProbe": _exec(["test", "-S", socket], periodSeconds=30, failureThreshold=3),
    }


def relaxed_for_conversion(workload: Obj, container: str, seconds: int) -> Obj:
    """`workload` (a Deployment or StatefulSet) with `container`'s startup probe allowing
    `seconds`: what slurmdbd's first start on a new Slurm release runs with. That start
    converts the accounting database's schema, which can take hours (SchedMD's
    doc/html/upgrades.shtml: nothing may time it out), and slurmdbd does not listen until it is
    done: the startup probe's five minutes, then the liveness probe, would kill it mid-way.
    The startup probe holds the liveness probe off until it passes, so liveness still guards
    slurmdbd once it listens. (Dropping the probes instead leaves, under server-side apply,
    the API server's defaulted fields of each: a probe without a handler, refused.) The upgrade
    puts the rendered probe back at its end."""
    spec = dict(workload.get("spec") or {})
    template = dict(spec.get("template") or {})
    pod = dict(template.get("spec") or {})
    pod["containers"] = [_relaxed(c, seconds) if c.get("name") == container else c
                         for c in pod.get("containers") or []]  # fmt: skip
    return {**workload, "spec": {**spec, "template": {**template, "spec": pod}}}


def _relaxed(container: Obj, seconds: int) -> Obj:
    startup = container.get("startupProbe") or container.get("livenessProbe")
    if startup is None:
        return container
    period = int(startup.get("periodSeconds") or 10)
    tries = max(int(startup.get("failureThreshold") or 3), -(-seconds // period))
    return {**container, "startupProbe": {**startup, "periodSeconds": period,
                                          "failureThreshold": tries}}  # fmt: skip
