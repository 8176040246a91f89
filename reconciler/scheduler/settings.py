"""The scheduler's settings, from the config repo's `scheduler.*` values and flags. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from reconciler import wellknown as wk
from reconciler.compile.accounting_off import accounting_on
from reconciler.compile.power import power_saving
from reconciler.config.defaults import DEFAULT_KILL_WAIT_SECONDS, served_scheduler_names
from reconciler.config.keys import default_of
from reconciler.errors import ConfigTypeError
from reconciler.scheduler.decide.gang_decide import FAILURE_POLICIES, FailurePolicy

DEFAULT_POLL_SECONDS = 5.0
DEFAULT_WORKERS = 16  # they wait on HTTP calls: in the benchmark 8 waited 90% of the time
# --hooks-api-bind-address=:8000, as in SUNK's "Schedule Kubernetes Pods with Slurm".
DEFAULT_HOOKS_PORT = 8000
# A job runs on a Slurm node whose slurmd Pod we do not see on a Node yet: look again after.
UNRESOLVED_NODE_RECHECK_SECONDS = 2.0


@dataclass(frozen=True)
class SchedulerSettings:
    name: str  # the spec.schedulerName the scheduler uses: its jobs' names, its Events
    release: str
    namespace: str  # where the slurmd Pods (and this scheduler) run
    watch_namespaces: tuple[str, ...] | None  # None: the whole cluster
    kill_wait_seconds: int = DEFAULT_KILL_WAIT_SECONDS
    hooks_host: str = "0.0.0.0"
    hooks_port: int = DEFAULT_HOOKS_PORT
    hooks_url: str = ""  # how placeholder jobs reach the hooks API; "" derives it
    poll_seconds: float = DEFAULT_POLL_SECONDS
    workers: int = DEFAULT_WORKERS
    # When a member of a running gang fails: "restart" (every member is deleted, for its
    # controller to make a new gang) or "keep-going" (a new member takes the free node).
    gang_failure_policy: FailurePolicy = "restart"
    # Partitions whose nodes get bin-packing weights (the fullest node that fits goes first).
    bin_pack_partitions: tuple[str, ...] = ()
    # slurmConfig.slurmd.suspendTime is set: slurmd Pods name this scheduler (power_effects.py).
    power_saving: bool = False
    # The uid of a Pod without sunk.coreweave.com/user-id (values
    # scheduler.podPolicy.defaultUserId); None: the operator's user, root
    # as SUNK's "Schedule Kubernetes Pods with Slurm" says.
    default_user_id: int | None = None
    # The other names Pods may set for it (config/defaults.py served_scheduler_names).
    aliases: tuple[str, ...] = ()
    # Whether slurm.conf runs Slurm accounting (compile/accounting_off.py); None: not known
    # (no config repo), and a Pod naming an account or QOS is told nothing.
    accounting: bool | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Every spec.schedulerName this scheduler answers to, its own name first."""
        return tuple(dict.fromkeys((self.name, *self.aliases)))

    @property
    def served(self) -> str:
        """The names, as Events and logs say them."""
        return f"scheduler {self.name} (answers to {', '.join(self.names)})"

    @property
    def hooks_secret_name(self) -> str:
        return f"{self.release}{wk.HOOKS_SECRET_SUFFIX}"


# What a running scheduler takes from each applied revision as it is (PowerKeeper.set_enabled).
LIVE_FIELDS = frozenset({"power_saving"})


def restart_needed(
    running: SchedulerSettings | None, wanted: SchedulerSettings | None
) -> tuple[str, ...]:
    """The settings a revision changes that a running scheduler cannot take as it is, so it
    is made again: () when none; ("enabled",) when it is turned on or off."""
    if running is None or wanted is None:
        return () if running is wanted else ("enabled",)
    differ = (f.name for f in dataclass_fields(SchedulerSettings)
              if getattr(running, f.name) != getattr(wanted, f.name))  # fmt: skip
    return tuple(name for name in differ if name not in LIVE_FIELDS)


def settings_from_values(
    values: Mapping[str, Any], *, release: str, namespace: str, **overrides: Any
) -> SchedulerSettings:
    scheduler = values.get("scheduler") or {}
    slurm = values.get("slurmConfig") or {}
    scope = scheduler.get("scope") or {}
    watch: tuple[str, ...] | None
    if scope.get("type") == "cluster":
        watch = None
    else:
        watch = _namespaces(scope.get("namespaces")) or (namespace,)
    kill_wait = scheduler.get("killWait", slurm.get("killWait", DEFAULT_KILL_WAIT_SECONDS))
    name = overrides.get("name") or scheduler.get("name") or None
    names = served_scheduler_names(namespace, release, name)
    fields: dict[str, Any] = {
        "name": names[0],
        "aliases": names[1:],
        "release": release,
        "namespace": namespace,
        "watch_namespaces": watch,
        "kill_wait_seconds": int(kill_wait),
        "gang_failure_policy": _gang_policy(
            scheduler.get("gangFailurePolicy", default_of("scheduler.gangFailurePolicy"))
        ),
        "bin_pack_partitions": _namespaces(scheduler.get("binPackPartitions")),
        "power_saving": power_saving(dict(values)) is not None,
        "default_user_id": (scheduler.get("podPolicy") or {}).get("defaultUserId"),
        "accounting": accounting_on(values),
    }
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return SchedulerSettings(**fields)


def _namespaces(raw: Any) -> tuple[str, ...]:
    """Names: SUNK takes a comma-separated string; a YAML list works too."""
    items = raw.split(",") if isinstance(raw, str) else raw or []
    return tuple(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))


def _gang_policy(raw: Any) -> FailurePolicy:
    if raw not in FAILURE_POLICIES:
        raise ConfigTypeError(
            f"scheduler.gangFailurePolicy: must be one of {', '.join(FAILURE_POLICIES)}, "
            f"got {raw!r}"
        )
    return raw
