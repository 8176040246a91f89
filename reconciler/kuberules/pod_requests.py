"""What a Pod requests of its Node, as Kubernetes counts it (component-helpers
`resource.PodRequests`, which kube-scheduler and the kubelet share; Kubernetes 1.29+, where
restartable init containers, "native sidecars", are on by default). Pure.

- The regular containers' requests are summed.
- Init containers run one at a time, before the others; a restartable one (`restartPolicy:
  Always`) keeps running beside everything started after it. So each init container needs its
  own request plus those of the restartable ones started before it, and the restartable ones
  also run beside the regular containers.
- The Pod asks for the larger of the two, per resource, plus `spec.overhead` (RuntimeClass).

A limit without a request counts as the request: the API server defaults it so, and a Pod read
from it already says so; a manifest not yet applied is counted as it will be.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from reconciler.compile.quantity import QuantityError, manifest_quantity

Requests = dict[str, Decimal]


def pod_requests(pod: Mapping[str, Any]) -> Requests:
    spec = pod.get("spec") or {}
    total: Requests = {}
    for container in spec.get("containers") or []:
        total = plus(total, container_requests(container))
    sidecars: Requests = {}  # the restartable init containers started so far
    init: Requests = {}
    for container in spec.get("initContainers") or []:
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            total = plus(total, own)
            sidecars = plus(sidecars, own)
            needs = sidecars
        else:
            needs = plus(own, sidecars)
        init = larger(init, needs)
    return plus(larger(total, init), quantities(spec.get("overhead")))


def container_requests(container: Mapping[str, Any]) -> Requests:
    resources = container.get("resources") or {}
    return quantities({**(resources.get("limits") or {}), **(resources.get("requests") or {})})


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
    return {k: a.get(k, Decimal(0)) + b.get(k, Decimal(0)) for k in {*a, *b}}


def larger(a: Requests, b: Requests) -> Requests:
    return {k: max(a.get(k, Decimal(0)), b.get(k, Decimal(0))) for k in {*a, *b}}
