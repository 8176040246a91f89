"""CPU and memory accounting of processes and threads, from /proc (Linux)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler.local.stack import LocalStack

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
REST_OF_MACHINE = "rest of the machine (job processes, curl, other stacks)"


def cpu_seconds(stat_path: str) -> float:
    """utime + stime of a process or thread (its /proc/.../stat), in seconds; 0 when it is gone."""
    try:
        fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def stack_cpu(runtime: Path) -> dict[str, float]:
    """CPU seconds so far of each daemon of the local stack in RUNTIME, as `label#name` (all
    slurmd under one label)."""
    out: dict[str, float] = {}
    supervisor = LocalStack.open(runtime).supervisor
    for name in sorted(supervisor.names()):
        record = supervisor.read(name)
        if record is None:
            continue
        label = "slurmd (all nodes)" if name.startswith("slurmd-") else name
        out[f"{label}#{name}"] = cpu_seconds(f"/proc/{record.pid}/stat")
    return out


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per label (keys are `label#id`; "machine" is the whole machine): a thread or process that
    appeared meanwhile counts from 0; one that ended meanwhile is left out. Labels starting with
    two spaces are threads of a process listed above them, not added to the rest."""
    used: dict[str, float] = {}
    for key, value in after.items():
        label = key.split("#", 1)[0]
        used[label] = used.get(label, 0.0) + max(0.0, value - before.get(key, 0.0))
    listed = sum(v for k, v in used.items() if k != "machine" and not k.startswith("  "))
    used[REST_OF_MACHINE] = used["machine"] - listed
    return used


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class JobMemory:
    stepds: int
    processes: int
    pss: int  # bytes, proportional set size of every process of the jobs

    def text(self, jobs: int) -> str:
        if not self.stepds:
            return "job processes not found (no slurmstepd under the stack's reaper)"
        per = self.pss / max(jobs, 1) / MIB
        return (
            f"{self.stepds} slurmstepd, {self.processes} job processes in all, PSS "
            f"{self.pss / 2**30:.2f} GiB ({per:.1f} MiB per job)"
        )


def job_memory(reaper: int, *, pss: bool = True) -> JobMemory:
    """slurmstepd processes whose parent is the stack's `up` process (slurmd double-forks them
    and the `up` process is the subreaper), with everything below them; PSS from smaps_rollup."""
    parent: dict[int, int] = {}
    comm: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        comm[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent[pid] = int(stat.rsplit(")", 1)[1].split()[1])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    roots = [p for p, pp in parent.items() if pp == reaper and comm[p] == "slurmstepd"]
    members, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        members.append(pid)
        todo.extend(children.get(pid, ()))
    total = 0
    for pid in members if pss else ():
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return JobMemory(len(roots), len(members), total)


@dataclass(frozen=True)
class Sample:
    """One look at a process: memory from /proc/PID/status, CPU from /proc/PID/stat."""

    at: float  # time.monotonic()
    rss: int  # bytes
    anon: int
    hwm: int
    threads: int
    cpu: float  # user + system seconds since the process started


def sample(pid: int) -> Sample:
    fields: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()

    def kib(key: str) -> int:
        return int(fields.get(key, "0 kB").split()[0]) * 1024

    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)
    return Sample(
        time.monotonic(),
        kib("VmRSS"),
        kib("RssAnon"),
        kib("VmHWM"),
        int(fields.get("Threads", "0")),
        cpu,
    )


def own_rss() -> dict[str, int] | None:
    """VmRSS / VmHWM of this process in bytes (Linux), or None where /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}
    except (OSError, KeyError, ValueError):
        return None


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False
