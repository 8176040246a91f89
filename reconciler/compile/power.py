"""Power saving (slurmConfig.slurmd.suspendTime): Slurm's own mechanism, with our programs.

Slurm powers down a node idle for SuspendTime by running SuspendProgram with its hostlist, and
powers one up for a job by running ResumeProgram. Ours are two short scripts, in a ConfigMap the
controller Pod mounts: they POST the hostlist to the reconciler's hooks API with a token from a
Secret the scheduler writes, and the scheduler deletes or brings back the node's slurmd Pod.
A node set's `minReplicas` is the floor kept warm (SuspendExcNodes=<its nodes>:<count>), its
`replicas` the most that run. Pure: the scheduler does the rest (scheduler/power_effects.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import hostlist

from reconciler import wellknown as wk
from reconciler.compile.profile import Profile
from reconciler.compile.slurm_nodes import SlurmNodeSpec
from reconciler.config.power_saving import PowerSaving, power_saving
from reconciler.config.values_view import ValuesView
from reconciler.errors import CompileError

PROGRAMS_DIR = "power"  # below the Slurm config directory, in the controller Pod
AUTH_DIR = "power-auth"
VERBS = ("suspend", "resume")
WAIT_PROLOG = "wait-for-resume"


def check_power_saving(view: ValuesView, specs: list[SlurmNodeSpec]) -> None:
    """Power saving needs our scheduler, and minReplicas needs power saving: neither is
    accepted and left to fail or be ignored."""
    if view.power is not None and not view.scheduler_enabled:
        # The slurmd Pods name our scheduler (it binds a resumed node's Pod), so without it
        # they would stay Pending forever.
        raise CompileError(
            f"slurmConfig.slurmd.suspendTime is {view.power.suspend_time} (power saving on), "
            "but scheduler.enabled is false: slurmd Pods are placed by our Pod scheduler when "
            "nodes power down, so with it off they would stay Pending forever",
            hint="set scheduler.enabled: true (the default), or slurmConfig.slurmd.suspendTime: "
            "INFINITE to keep every node powered up",
        )
    if view.power is not None:
        return
    for spec in specs:
        if spec.min_replicas is not None:
            raise CompileError(
                f"node definition {spec.nodeset!r}: minReplicas is set, but nodes never power "
                "down (slurmConfig.slurmd.suspendTime is unset or INFINITE)",
                hint="set slurmConfig.slurmd.suspendTime, or remove minReplicas",
            )


def power_conf(values: dict[str, Any], specs: list[SlurmNodeSpec], conf_dir: str) -> dict[str, str]:
    """The slurm.conf keys power saving needs ({} when it is off)."""
    power = power_saving(values)
    if power is None:
        return {}
    settings = {
        "SuspendProgram": f"{conf_dir}/{PROGRAMS_DIR}/suspend",
        "ResumeProgram": f"{conf_dir}/{PROGRAMS_DIR}/resume",
        "SuspendTimeout": str(power.suspend_timeout),
        "ResumeTimeout": str(power.resume_timeout),
        "PrologSlurmctld": f"{conf_dir}/{PROGRAMS_DIR}/{WAIT_PROLOG}",
    }
    floors = [f"{hostlist.collect_hostlist(s.node_names())}:{s.min_replicas}"
              for s in specs if s.min_replicas and s.replicas]  # fmt: skip
    if floors:
        settings["SuspendExcNodes"] = ",".join(floors)
    return settings


def programs_map_name(release: str) -> str:
    return f"{release}{wk.POWER_PROGRAMS_SUFFIX}"


def power_secret_name(release: str) -> str:
    return f"{release}{wk.POWER_SECRET_SUFFIX}"


def program_script(verb: str, conf_dir: str) -> str:
    """SuspendProgram / ResumeProgram: hand Slurm's hostlist ($1) to the reconciler.

    The token is read by curl from a file (`-H @file`), never put on a command line `ps` shows.
    A non-zero exit is logged by slurmctld; for a resume, the node goes DOWN after
    ResumeTimeout unless a later call brings it up."""
    auth = f"{conf_dir}/{AUTH_DIR}"
    return "\n".join([
        "#!/bin/sh",
        f"# Slurm's {'SuspendProgram' if verb == 'suspend' else 'ResumeProgram'}, rendered by "
        "reconciler: $1 is the hostlist Slurm powers "
        f"{'down' if verb == 'suspend' else 'up'}.",
        "set -eu",
        f'auth="{auth}"',
        f'if [ ! -r "$auth/{wk.POWER_SECRET_URL_KEY}" ]; then',
        f'  echo "power {verb} $1: $auth/{wk.POWER_SECRET_URL_KEY} is missing: is the '
        'reconciler scheduler running?" >&2',
        "  exit 1",
        "fi",
        f'url=$(cat "$auth/{wk.POWER_SECRET_URL_KEY}")',
        f'exec curl -fsS --max-time 10 --retry 5 --retry-delay 1 -X POST -G '
        f'-H @"$auth/{wk.POWER_SECRET_HEADER_KEY}" --data-urlencode "nodes=$1" '
        f'"$url{wk.HOOKS_POWER_PREFIX}{verb}"',
        "",
    ])  # fmt: skip


def wait_prolog(resume_timeout: int, conf_dir: str, client_env: Mapping[str, str]) -> str:
    """PrologSlurmctld: slurmctld launches a batch job on resumed nodes only at its next 30 s
    check (PERIODIC_TIMEOUT), or when this prolog ends with the nodes up. So it waits for them,
    and always exits 0: a failing PrologSlurmctld would requeue or cancel the job."""
    tries = resume_timeout * 5
    return "\n".join([
        "#!/bin/sh",
        "# PrologSlurmctld, rendered by reconciler (power saving): ends once the job's nodes",
        "# are powered up, so slurmctld starts the job then rather than up to 30 s later.",
        # slurmctld gives its scripts neither PATH nor SLURM_CONF.
        f'export SLURM_CONF="${{SLURM_CONF:-{conf_dir}/slurm.conf}}"',
        *(f"export {k}={shlex.quote(v)}" for k, v in sorted(client_env.items())),
        '[ -n "${SLURM_JOB_NODELIST:-}" ] || exit 0',
        "i=0",
        f"while [ $i -lt {tries} ]; do",
        '  scontrol show node "$SLURM_JOB_NODELIST" -o 2>/dev/null |',
        "    grep -q -e POWERING_UP -e POWERED_DOWN || exit 0",
        "  sleep 0.2",
        "  i=$((i + 1))",
        "done",
        "exit 0",
        "",
    ])  # fmt: skip


def program_files(power: PowerSaving | None, profile: Profile) -> dict[str, str]:
    files = {verb: program_script(verb, profile.conf_dir) for verb in VERBS}
    if power is not None:
        files[WAIT_PROLOG] = wait_prolog(power.resume_timeout, profile.conf_dir, profile.client_env)
    return files


def controller_power_volumes(release: str) -> list[dict[str, Any]]:
    return [
        {"name": "power-programs",
         "configMap": {"name": programs_map_name(release), "defaultMode": 0o755}},
        # Optional: the controller starts before the scheduler has written it.
        {"name": "power-auth",
         "secret": {"secretName": power_secret_name(release), "optional": True,
                    "defaultMode": 0o440}},
    ]  # fmt: skip


def controller_power_mounts(conf_mount: str) -> list[dict[str, Any]]:
    return [
        {"name": "power-programs", "mountPath": f"{conf_mount}/{PROGRAMS_DIR}", "readOnly": True},
        {"name": "power-auth", "mountPath": f"{conf_mount}/{AUTH_DIR}", "readOnly": True},
    ]
