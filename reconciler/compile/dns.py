"""How Slurm's daemons find slurmd: by the Slurm node's name, which is its Pod's name.

slurm.conf's NodeName lines carry no NodeAddr or NodeHostname, as in SUNK (SUNK's "Slurm Workload
Manager" page lists the nodes as `slurm-rtx4000-0`, and `srun hostname` prints the Pod names), so
Slurm resolves the node's name. A StatefulSet Pod's name resolves in the cluster's DNS as
`<pod>.<release>-compute.<namespace>.svc.<cluster domain>` (the headless compute Service, which
publishes not-ready addresses: a slurmd is reached before its Pod is Ready). Every Pod that talks to
slurmd gets that Service's domain as a DNS search path: the controller (slurmctld), the login Pods
(srun, sbatch) and the slurmd Pods (slurmd forwards to slurmd; jobs run srun). NodeAddr would freeze
an address slurm.conf cannot follow when a Pod moves; a name follows the Pod.
docs/rendered-pods.md#names says the same for users.
"""

from __future__ import annotations

from reconciler.config.keys import default_of
from reconciler.objects import Obj

DEFAULT_CLUSTER_DOMAIN = default_of("clusterDomain")


def compute_service_name(release: str) -> str:
    return f"{release}-compute"


def compute_search_domain(release: str, namespace: str, values: Obj) -> str:
    domain = values.get("clusterDomain") or DEFAULT_CLUSTER_DOMAIN
    return f"{compute_service_name(release)}.{namespace}.svc.{domain}"


def with_compute_search(pod: Obj, release: str, namespace: str, values: Obj) -> Obj:
    """`pod` with the compute Service's domain first among its DNS searches (after any the
    Pod's own `dnsConfig` lists)."""
    config = dict(pod.get("dnsConfig") or {})
    searches = list(config.get("searches") or [])
    domain = compute_search_domain(release, namespace, values)
    if domain not in searches:
        searches.append(domain)
    return {**pod, "dnsConfig": {**config, "searches": searches}}
