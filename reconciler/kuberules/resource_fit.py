"""Does a Pod fit what a Node has left? kube-scheduler's NodeResourcesFit filter. Pure.

A port of `fitsRequest` (pkg/scheduler/framework/plugins/noderesources/fit.go, upstream master
of 2026; 1.20's is the same file) over the amounts kube-scheduler keeps (framework.Resource):

- Pods: the Node's allocatable `pods` must exceed the Pods already on it ("Too many pods"). A
  Node that does not say how many Pods it takes takes none. This is checked for every Pod.
- cpu, memory, ephemeral-storage and each scalar resource (an extended resource such as
  example.com/gpu, a hugepages-* size, a *kubernetes.io/ resource, attachable-volumes-*): a
  request above allocatable minus what the Pods on the Node request is "Insufficient <name>".
  A zero request is never checked. A resource the Node does not have counts as 0 allocatable,
  so any request of it is insufficient. Names kube-scheduler does not track are ignored.
- Amounts as kube-scheduler holds them: cpu rounded up to a millicore, the rest up to a unit,
  once per Pod (`scheduler_amounts`).

Each shortfall says the request, what the Pods on the Node use and the allocatable, and whether
it is `unresolvable`: more than the Node has at all, so no preemption could make room (upstream's
flag, newer than 1.20).

Changes since 1.20, whose table the tests port beside current upstream's rows:
- A zero request is skipped (1.28, #116408; for scalar resources earlier, #111544). 1.20 compared
  it too, so a Node whose Pods already request more cpu than it has refused a Pod asking no cpu.
- `Unresolvable` (above) is new; DRA-backed extended resources (DRAExtendedResource) are handed to
  the DynamicResources plugin: not done here (a Node lacking the resource is insufficient).
Not ported: the plugin's ignoredResources/ignoredResourceGroups arguments (we run the default
profile, which ignores none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from reconciler.kuberules.pod_requests import MILLI, Requests, plus, pod_requests, round_up
from reconciler.kuberules.validation import is_qualified_name

_NAMED = ("cpu", "memory", "ephemeral-storage")  # checked first, in this order, as upstream


@dataclass(frozen=True)
class Insufficient:
    """One reason the Pod does not fit (upstream's InsufficientResource). Amounts in the
    resource's own unit (cpu in cores); for "pods", Pods."""

    resource: str
    reason: str  # "Too many pods", "Insufficient cpu", "Insufficient example.com/gpu", ...
    requested: Decimal
    used: Decimal
    capacity: Decimal
    unresolvable: bool = False  # more than the Node has at all


def insufficient_resources(
    wanted: Requests, allocatable: Requests, used: Requests, *, pods_on_node: int
) -> list[Insufficient]:
    """Why the Pod does not fit, [] when it does. `wanted`: `pod_requests(pod)`;
    `allocatable`: the Node's status.allocatable; `used`: `node_requested` of the Pods on the
    Node; `pods_on_node`: how many they are."""
    out = []
    allowed = round_up(allocatable.get("pods", Decimal(0)), Decimal(1))
    on_node = Decimal(pods_on_node)
    if on_node + 1 > allowed:
        out.append(Insufficient("pods", "Too many pods", Decimal(1), on_node, allowed))
    want, have, taken = (scheduler_amounts(r) for r in (wanted, allocatable, used))
    scalars = sorted(name for name in want if name not in _NAMED)
    for name in [*_NAMED, *scalars]:
        amount = want.get(name, Decimal(0))
        capacity, in_use = have.get(name, Decimal(0)), taken.get(name, Decimal(0))
        if amount > 0 and amount > capacity - in_use:
            reason = f"Insufficient {name}"
            out.append(Insufficient(name, reason, amount, in_use, capacity, amount > capacity))
    return out


def fits(wanted: Requests, allocatable: Requests, used: Requests, *, pods_on_node: int) -> bool:
    return not insufficient_resources(wanted, allocatable, used, pods_on_node=pods_on_node)


def node_requested(pods: Iterable[Mapping[str, Any]]) -> Requests:
    """What kube-scheduler counts as requested on a Node (NodeInfo.Requested) for the Pods
    bound to it: each Pod's requests with its resize status, rounded once per Pod. Pass the
    Pods whose spec.nodeName is the Node and whose phase is neither Succeeded nor Failed
    (kube-scheduler's informer drops those; terminating Pods still count)."""
    used: Requests = {}
    for pod in pods:
        used = plus(used, scheduler_amounts(pod_requests(pod, status_resources=True)))
    return used


def scheduler_amounts(requests: Requests) -> Requests:
    """The resources kube-scheduler tracks, as it holds them: cpu rounded up to a millicore
    (Quantity.MilliValue), the others up to a unit (Quantity.Value)."""
    out: Requests = {}
    for name, amount in requests.items():
        if name == "cpu":
            out[name] = round_up(amount, MILLI)
        elif name in _NAMED or is_scalar_resource(name):
            out[name] = round_up(amount, Decimal(1))
    return out


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages, kubernetes.io-prefixed and
    attachable-volumes resources."""
    return (
        is_extended_resource(name)
        or name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
    )


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a domain-prefixed name outside *kubernetes.io/ that
    is still a qualified name with "requests." in front (how quota names it)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not is_qualified_name(f"requests.{name}")
