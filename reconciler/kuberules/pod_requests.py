"""What a Pod requests of its Node, as Kubernetes counts it. Pure.

A port of component-helpers' `resource.PodRequests` and `AggregateContainerRequests`
(staging/src/k8s.io/component-helpers/resource/helpers.go, upstream master of 2026), which
kube-scheduler's NodeResourcesFit and the kubelet's admission share:

- The regular containers' requests are summed.
- Init containers run one at a time, before the others; a restartable one (`restartPolicy:
  Always`, a native sidecar) keeps running beside everything started after it. So each init
  container needs its own request plus those of the restartable ones started before it, and the
  restartable ones also run beside the regular containers. The Pod needs the larger of the two,
  per resource (a resource only an init container asks for is counted too).
- Pod-level requests (`spec.resources.requests`), when they name cpu, memory or a hugepages-*
  size, replace what the containers add up to for each of those they name; other resources
  stay the containers' (ephemeral-storage and extended resources have no pod-level request).
- `spec.overhead` (RuntimeClass) is added last.

`api_defaults` (on unless a caller asks) counts the Pod as the API server stores it, so a
manifest not yet applied is counted as it will be (SetDefaults_Pod and SetDefaults_ResourceList
in pkg/apis/core/v1/defaults.go): a container limit without a request becomes the request; with
pod-level limits, a pod-level cpu/memory/hugepages request the Pod leaves out becomes what the
containers request or, when no container requests it, the pod-level limit (defaultPodRequests);
then every quantity is rounded up to a thousandth (cpu "100n" is stored as "1m"). A Pod read from
the API server already is so. (defaultHugePagePodLimits is left out: the pod-level hugepages
request it leads to equals what the containers request, since a container's hugepages request
must equal its limit.) Without it the answer is PodRequests over the object as given, as
upstream's tests call it.

`status_resources` is PodRequests' UseStatusResources, which kube-scheduler sets for the Pods
already bound to a Node while InPlacePodVerticalScaling is on: during an in-place resize each
container counts the largest of its spec request, `status.containerStatuses[].allocatedResources`
and `.resources.requests` (only the last two when the resize is Infeasible). Use it for bound
Pods; a Pending Pod has no container statuses, so it changes nothing there. Not read: the
pod-level status (`status.resources`, `status.allocatedResources`, used under
InPlacePodLevelResourcesVerticalScaling, alpha 1.35, beta 1.36) and DRA node-allocatable claims
(UseDRANodeAllocatableResourceClaimStatus, upstream master).

Feature gates (pkg/features/kube_features.go), default on from:
- SidecarContainers (restartable init containers): alpha 1.28, beta on 1.29, GA 1.33.
- PodOverhead: alpha 1.16, beta on 1.18, GA 1.24 (gate removed 1.26).
- PodLevelResources: alpha 1.32 (off; cpu and memory only), beta on 1.34.
- InPlacePodVerticalScaling: alpha 1.27, beta on 1.33, GA 1.35.

Kubernetes 1.20 (kube-scheduler's computePodResourceRequest in
pkg/scheduler/framework/plugins/noderesources/fit.go) sums the containers, takes the largest init
container and adds the overhead (PodOverhead beta, on). Its API drops the fields it does not know,
so a Pod read from a 1.20 API server has no init-container restartPolicy, no spec.resources and
no resize status, and this gives 1.20's answer for it. (1.20 rounds cpu up to a millicore and
other resources up to a unit per container, kube-scheduler now once per Pod: resource_fit.py.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import ROUND_CEILING, Context, Decimal
from functools import reduce
from typing import Any, NamedTuple

from reconciler.kuberules.quantity import QuantityError, manifest_quantity
from reconciler.objects import ReadObj as Obj

Requests = dict[str, Decimal]

HUGEPAGES_PREFIX = "hugepages-"
# Exact sums: at the default 28 digits, 1Ei plus 1m would be rounded.
EXACT = Context(prec=1000)
MILLI = Decimal("0.001")


class _Container(NamedTuple):
    name: str
    requests: Requests
    restartable: bool  # an init container with restartPolicy Always: a sidecar


def pod_requests(
    pod: Obj, *, api_defaults: bool = True, status_resources: bool = False
) -> Requests:
    """Resource name -> amount the Pod requests (PodRequests; the options: module doc)."""
    spec = pod.get("spec") or {}
    regular = [_container(c, api_defaults, init=False) for c in spec.get("containers") or []]
    inits = [_container(c, api_defaults, init=True) for c in spec.get("initContainers") or []]
    pod_level = quantities((spec.get("resources") or {}).get("requests"))
    overhead = quantities(spec.get("overhead"))
    if api_defaults:
        limits = quantities((spec.get("resources") or {}).get("limits"))
        pod_level = _default_pod_level(pod_level, limits, _aggregate(regular, inits))
        regular = [c._replace(requests=_milli_up(c.requests)) for c in regular]
        inits = [c._replace(requests=_milli_up(c.requests)) for c in inits]
        pod_level, overhead = _milli_up(pod_level), _milli_up(overhead)
    if status_resources:
        total = _with_status(regular, inits, pod.get("status") or {})
    else:
        total = _aggregate(regular, inits)
    if any(is_pod_level_resource(name) for name in pod_level):
        total.update({k: v for k, v in pod_level.items() if is_pod_level_resource(k)})
    return plus(total, overhead)


def is_pod_level_resource(name: str) -> bool:
    """IsSupportedPodLevelResource: what a pod-level request may replace."""
    return name in ("cpu", "memory") or name.startswith(HUGEPAGES_PREFIX)


def _container(container: Obj, api_defaults: bool, *, init: bool) -> _Container:
    resources = container.get("resources") or {}
    raw = resources.get("requests") or {}
    if api_defaults:  # SetDefaults_Pod: a limit without a request becomes the request
        raw = {**(resources.get("limits") or {}), **raw}
    restartable = init and container.get("restartPolicy") == "Always"
    return _Container(str(container.get("name") or ""), quantities(raw), restartable)


def _aggregate(regular: Iterable[_Container], inits: Iterable[_Container]) -> Requests:
    """aggregateContainerResourcesByFn over the containers' requests (the KEP-753 formula)."""
    total: Requests = {}
    for container in regular:
        total = plus(total, container.requests)
    sidecars: Requests = {}  # the restartable init containers started so far
    peak: Requests = {}  # the most any one init container needs while it runs
    for container in inits:
        if container.restartable:
            total = plus(total, container.requests)
            sidecars = plus(sidecars, container.requests)
            needs = sidecars
        else:
            needs = plus(container.requests, sidecars)
        peak = larger(peak, needs)
    return larger(total, peak)


def _with_status(regular: list[_Container], inits: list[_Container], status: Obj) -> Requests:
    """AggregateContainerRequests with UseStatusResources, the container-level path."""
    infeasible = _resize_infeasible(status)
    found: dict[str, Obj] = {}
    # findContainerStatus: the first status of that name, regular containers' first.
    for entry in [*(status.get("containerStatuses") or []),
                  *(status.get("initContainerStatuses") or [])]:  # fmt: skip
        found.setdefault(str(entry.get("name") or ""), entry)

    def allocated(container: _Container) -> Requests:
        entry = found.get(container.name) or {}
        if entry.get("allocatedResources") is not None:
            return quantities(entry["allocatedResources"])
        return {} if infeasible else container.requests

    def actuated(container: _Container) -> Requests:
        entry = found.get(container.name) or {}
        if (entry.get("resources") or {}).get("requests") is not None:
            return quantities(entry["resources"]["requests"])
        return allocated(container)

    def by(requests_of: Callable[[_Container], Requests]) -> Requests:
        return _aggregate(
            [c._replace(requests=requests_of(c)) for c in regular],
            [c._replace(requests=requests_of(c)) for c in inits],
        )

    totals = [by(actuated), by(allocated)]
    if not infeasible:
        totals.append(_aggregate(regular, inits))
    return reduce(larger, totals)


def _resize_infeasible(status: Obj) -> bool:
    """IsPodResizeInfeasible: the first PodResizePending condition says Infeasible."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodResizePending":
            return condition.get("reason") == "Infeasible"
    return False


def _default_pod_level(requests: Requests, limits: Requests, containers: Requests) -> Requests:
    """defaultPodRequests: only when pod-level limits are set, a pod-level cpu or memory request
    left out becomes what the containers request; then any still left out, the limit."""
    if not limits:
        return requests
    out = dict(requests)
    for name in ("cpu", "memory"):  # supported at pod level and overcommittable
        if name in containers:
            out.setdefault(name, containers[name])
    for name, amount in limits.items():
        if is_pod_level_resource(name):
            out.setdefault(name, amount)
    return out


def _milli_up(requests: Requests) -> Requests:
    """SetDefaults_ResourceList: every quantity rounded up to a thousandth."""
    return {name: round_up(amount, MILLI) for name, amount in requests.items()}


def round_up(amount: Decimal, unit: Decimal) -> Decimal:
    """The least whole number of `unit`s at or above `amount`, exactly."""
    units = EXACT.divide(amount, unit).to_integral_value(rounding=ROUND_CEILING)
    return EXACT.multiply(units, unit)


def quantities(raw: Mapping[str, Any] | None) -> Requests:
    """Resource name -> amount; a value that is no quantity is left out (the API server
    refuses such a Pod, so one read from it never has one)."""
    out: Requests = {}
    for resource, value in (raw or {}).items():
        try:
            out[str(resource)] = manifest_quantity(value)
        except QuantityError:
            continue
    return out


def plus(a: Requests, b: Requests) -> Requests:
    """addResourceList: every resource of either, summed."""
    zero = Decimal(0)
    return {k: EXACT.add(a.get(k, zero), b.get(k, zero)) for k in {*a, *b}}


def larger(a: Requests, b: Requests) -> Requests:
    """maxResourceList: every resource of either, the larger amount."""
    return {k: max(a.get(k, Decimal(0)), b.get(k, Decimal(0))) for k in {*a, *b}}
