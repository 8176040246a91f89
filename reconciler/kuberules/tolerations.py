"""Taints and tolerations, as the default scheduler reads them (pure), checked against
Kubernetes v1.20.2 and the current upstream: the TaintToleration filter (untolerated NoSchedule
and NoExecute taints: FindMatchingUntoleratedTaint with that effect filter) and the
NodeUnschedulable filter (spec.unschedulable, tolerated like the taint below).

A Slurm node whose Kubernetes Node carries a NoSchedule or NoExecute taint the Pod does not tolerate
is excluded from the Pod's job, so the kubelet never rejects a bound Pod (SUNK does not evaluate
taints: SUNK's "SUNK Pod Scheduler" page, "Known limitations"). PreferNoSchedule is a preference,
not a rule, and is ignored, as a bound Pod may run there. A cordoned Node counts as tainted with
node.kubernetes.io/unschedulable:NoSchedule, as the default scheduler treats it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

# Taint effects that keep Pods off a Node (this filter, and the drains of
# sync/node_health_decide.py); PreferNoSchedule only discourages them.
BLOCKING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})
UNSCHEDULABLE_TAINT: Final = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}

Taint = Mapping[str, Any]


def blocking_taints(node: Mapping[str, Any]) -> list[Taint]:
    """The Node's taints that keep Pods off it, a cordon included."""
    taints = node_taints(node)
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append(UNSCHEDULABLE_TAINT)
    return taints


def node_taints(node: Mapping[str, Any]) -> list[Taint]:
    """The NoSchedule and NoExecute taints the Node carries (TaintToleration's; the cordon is
    NodeUnschedulable's)."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return [t for t in taints if t.get("effect") in BLOCKING_EFFECTS]


def tolerates_all(pod: Mapping[str, Any], taints: Iterable[Taint]) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or ()
    return all(any(_tolerates(t, taint) for t in tolerations) for taint in taints)


def untolerated(pod: Mapping[str, Any], taints: Iterable[Taint]) -> list[Taint]:
    tolerations = (pod.get("spec") or {}).get("tolerations") or ()
    return [taint for taint in taints if not any(_tolerates(t, taint) for t in tolerations)]


def _tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """v1.Toleration.ToleratesTaint (1.20.2 and current upstream): an empty effect matches every
    effect and an empty key every key; Exists matches any value, Equal (or no operator) the same
    value, so an empty key with Equal matches the taints of that value (the API server refuses
    that toleration, the function does not). Any other operator matches nothing: 1.20 has no
    other, and current upstream honours Gt/Lt only behind the alpha gate
    TaintTolerationComparisonOperators, off by default. tolerationSeconds does not count here."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def describe(taint: Taint) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + value if value else ''}:{taint.get('effect')}"
