"""Kubernetes' own test tables for taints and tolerations (ToleratesTaint, the TaintToleration
and NodeUnschedulable filters), ported as data: each table names its upstream file, test
function and version; rows keep upstream's descriptions. `ours` and `why` mark a deliberate
difference.
"""

from __future__ import annotations

from typing import Any, Final

Row = dict[str, Any]

# TestTolerationToleratesTaint, staging/src/k8s.io/api/core/v1/toleration_test.go, v1.20.2 (the
# first six rows of current upstream). Checked one toleration against one taint.
TOLERATION_TOLERATES_TAINT: Final[list[Row]] = [
    {
        "description": (
            "toleration and taint have the same key and effect, and operator is Exists, and taint "
            "has no value, expect tolerated"
        ),
        "toleration": {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
        "taint": {"key": "foo", "effect": "NoSchedule"},
        "want": True,
    },
    {
        "description": (
            "toleration and taint have the same key and effect, and operator is Exists, and taint "
            "has some value, expect tolerated"
        ),
        "toleration": {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
        "taint": {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        "want": True,
    },
    {
        "description": (
            "toleration and taint have the same effect, toleration has empty key and operator is "
            "Exists, means match all taints, expect tolerated"
        ),
        "toleration": {"operator": "Exists", "effect": "NoSchedule"},
        "taint": {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        "want": True,
    },
    {
        "description": (
            "toleration and taint have the same key, effect and value, and operator is Equal, "
            "expect tolerated"
        ),
        "toleration": {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
        "taint": {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        "want": True,
    },
    {
        "description": (
            "toleration and taint have the same key and effect, but different values, and operator "
            "is Equal, expect not tolerated"
        ),
        "toleration": {
            "key": "foo",
            "operator": "Equal",
            "value": "value1",
            "effect": "NoSchedule",
        },
        "taint": {"key": "foo", "value": "value2", "effect": "NoSchedule"},
        "want": False,
    },
    {
        "description": (
            "toleration and taint have the same key and value, but different effects, and operator "
            "is Equal, expect not tolerated"
        ),
        "toleration": {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
        "taint": {"key": "foo", "value": "bar", "effect": "NoExecute"},
        "want": False,
    },
]

# TestTolerationToleratesTaint, current upstream (kubernetes/kubernetes 19c6083b): the Gt/Lt rows
# added since v1.20.2. Upstream calls ToleratesTaint with the comparison operators enabled.
TOLERATION_TOLERATES_TAINT_NEWER: Final[list[Row]] = [
    {
        "description": (
            "toleration with Gt operator - taint value less than toleration value, expect not "
            "tolerated"
        ),
        "toleration": {
            "key": "node.kubernetes.io/sla",
            "operator": "Gt",
            "value": "950",
            "effect": "NoSchedule",
        },
        "taint": {"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"},
        "want": False,
    },
    {
        "description": (
            "toleration with Gt operator - taint value greater than toleration value, expect "
            "tolerated"
        ),
        "toleration": {
            "key": "node.kubernetes.io/sla",
            "operator": "Gt",
            "value": "750",
            "effect": "NoSchedule",
        },
        "taint": {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "description": (
            "toleration with Lt operator - taint value greater than toleration value, expect not "
            "tolerated"
        ),
        "toleration": {
            "key": "node.kubernetes.io/sla",
            "operator": "Lt",
            "value": "800",
            "effect": "NoSchedule",
        },
        "taint": {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        "want": False,
    },
    {
        "description": (
            "toleration with Lt operator - taint value less than toleration value, expect tolerated"
        ),
        "toleration": {
            "key": "node.kubernetes.io/sla",
            "operator": "Lt",
            "value": "950",
            "effect": "NoSchedule",
        },
        "taint": {"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"},
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "description": (
            "toleration with Gt operator and taint with equal numeric value, expect not tolerated"
        ),
        "toleration": {
            "key": "node.kubernetes.io/sla",
            "operator": "Gt",
            "value": "950",
            "effect": "NoSchedule",
        },
        "taint": {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        "want": False,
    },
    {
        "description": (
            "toleration with Gt operator and taint with non-numeric value, expect not tolerated"
        ),
        "toleration": {
            "key": "node.kubernetes.io/sla",
            "operator": "Gt",
            "value": "950",
            "effect": "NoSchedule",
        },
        "taint": {"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"},
        "want": False,
    },
    {
        "description": (
            "toleration with Gt operator and negative numeric values - taint value less than "
            "threshold, expect not tolerated"
        ),
        "toleration": {
            "key": "test-key",
            "operator": "Gt",
            "value": "-100",
            "effect": "NoSchedule",
        },
        "taint": {"key": "test-key", "value": "-200", "effect": "NoSchedule"},
        "want": False,
    },
    {
        "description": (
            "toleration with Gt operator and large int64 values - taint value less than threshold, "
            "expect not tolerated"
        ),
        "toleration": {
            "key": "test-key",
            "operator": "Gt",
            "value": "9223372036854775806",
            "effect": "NoSchedule",
        },
        "taint": {"key": "test-key", "value": "100", "effect": "NoSchedule"},
        "want": False,
    },
]

# TestTolerationsTolerateTaintsWithFilter, pkg/apis/core/v1/helper/helpers_test.go, v1.20.2; the
# same six rows open current upstream's TestFindMatchingUntoleratedTaint
# (staging/src/k8s.io/component-helpers/scheduling/corev1/helpers_test.go). `filter` names the Go
# applyFilter: "all" (returns true, or nil), "none" (returns false), "NoExecute" (that effect only).
TOLERATIONS_TOLERATE_TAINTS_WITH_FILTER: Final[list[Row]] = [
    {
        "description": "empty tolerations tolerate empty taints",
        "tolerations": [],
        "taints": [],
        "filter": "all",
        "want": True,
    },
    {
        "description": "non-empty tolerations tolerate empty taints",
        "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        "taints": [],
        "filter": "all",
        "want": True,
    },
    {
        "description": "tolerations match all taints, expect tolerated",
        "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        "taints": [{"key": "foo", "effect": "NoSchedule"}],
        "filter": "all",
        "want": True,
    },
    {
        "description": (
            "tolerations don't match taints, but no taints apply to the filter, expect tolerated"
        ),
        "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        "taints": [{"key": "bar", "effect": "NoSchedule"}],
        "filter": "none",
        "want": True,
    },
    {
        "description": (
            "no filterFunc indicated, means all taints apply to the filter, tolerations don't "
            "match taints, expect untolerated"
        ),
        "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        "taints": [{"key": "bar", "effect": "NoSchedule"}],
        "filter": None,
        "want": False,
    },
    {
        "description": "tolerations match taints, expect tolerated",
        "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoExecute"}],
        "taints": [{"key": "foo", "effect": "NoExecute"}, {"key": "bar", "effect": "NoSchedule"}],
        "filter": "NoExecute",
        "want": True,
    },
]

# TestFindMatchingUntoleratedTaint, current upstream (kubernetes/kubernetes 04c0d74f): the rows
# added since v1.20.2, all with enableComparisonOperatorsFG true.
FIND_MATCHING_UNTOLERATED_TAINT_NEWER: Final[list[Row]] = [
    {
        "description": "numeric Gt operator with taint value below threshold, expect not tolerated",
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}],
        "filter": "all",
        "want": False,
    },
    {
        "description": "numeric Gt operator with taint value above threshold, expect tolerated",
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "750",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}],
        "filter": "all",
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "description": "numeric Lt operator with taint value above threshold, expect not tolerated",
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Lt",
                "value": "800",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}],
        "filter": "all",
        "want": False,
    },
    {
        "description": "numeric Gt operator with non-numeric taint value, expect not tolerated",
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"}],
        "filter": "all",
        "want": False,
    },
    {
        "description": (
            "numeric Gt parse error is ignored when a later toleration matches the taint"
        ),
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "950",
                "effect": "NoSchedule",
            },
            {"key": "node.kubernetes.io/sla", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"}],
        "filter": "all",
        "want": True,
    },
]

# TestTaintTolerationFilter,
# pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go, v1.20.2 and the first
# nine rows of current upstream (same inputs and verdicts). The filter's outcome is
# tolerates_all(pod, blocking_taints(node)): PreferNoSchedule is ignored.
TAINT_TOLERATION_FILTER: Final[list[Row]] = [
    {
        "name": "A pod having no tolerations can't be scheduled onto a node with nonempty taints",
        "tolerations": [],
        "taints": [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        "want": False,
    },
    {
        "name": (
            "A pod which can be scheduled on a dedicated node assigned to user1 with effect "
            "NoSchedule"
        ),
        "tolerations": [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        "taints": [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        "want": True,
    },
    {
        "name": (
            "A pod which can't be scheduled on a dedicated node assigned to user2 with effect "
            "NoSchedule"
        ),
        "tolerations": [
            {
                "key": "dedicated",
                "operator": "Equal",
                "value": "user2",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        "want": False,
    },
    {
        "name": (
            "A pod can be scheduled onto the node, with a toleration uses operator Exists that "
            "tolerates the taints on the node"
        ),
        "tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        "taints": [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        "want": True,
    },
    {
        "name": (
            "A pod has multiple tolerations, node has multiple taints, all the taints are "
            "tolerated, pod can be scheduled onto the node"
        ),
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
            {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "taints": [
            {"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        ],
        "want": True,
    },
    {
        "name": (
            "A pod has a toleration that keys and values match the taint on the node, but "
            "(non-empty) effect doesn't match, can't be scheduled onto the node"
        ),
        "tolerations": [
            {
                "key": "foo",
                "operator": "Equal",
                "value": "bar",
                "effect": "PreferNoSchedule",
            }
        ],
        "taints": [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        "want": False,
    },
    {
        "name": (
            "The pod has a toleration that keys and values match the taint on the node, the effect "
            "of toleration is empty, and the effect of taint is NoSchedule. Pod can be scheduled "
            "onto the node"
        ),
        "tolerations": [{"key": "foo", "operator": "Equal", "value": "bar"}],
        "taints": [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        "want": True,
    },
    {
        "name": (
            "The pod has a toleration that key and value don't match the taint on the node, but "
            "the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node"
        ),
        "tolerations": [
            {
                "key": "dedicated",
                "operator": "Equal",
                "value": "user2",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}],
        "want": True,
    },
    {
        "name": (
            "The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod "
            "can be scheduled onto the node"
        ),
        "tolerations": [],
        "taints": [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}],
        "want": True,
    },
]

# TestTaintTolerationFilter, current upstream (kubernetes/kubernetes 04c0d74f): the Gt/Lt rows added
# since v1.20.2, all with the TaintTolerationComparisonOperators gate enabled.
TAINT_TOLERATION_FILTER_NEWER: Final[list[Row]] = [
    {
        "name": (
            "Pod with Gt toleration cannot be scheduled on node when taint value is lower than "
            "threshold"
        ),
        "tolerations": [
            {
                "key": "node.example.com/priority-level",
                "operator": "Gt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [
            {
                "key": "node.example.com/priority-level",
                "value": "800",
                "effect": "NoSchedule",
            }
        ],
        "want": False,
    },
    {
        "name": (
            "Pod with Gt toleration can be scheduled on node when taint value is higher than "
            "threshold"
        ),
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "750",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}],
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "name": (
            "Pod with Lt toleration cannot be scheduled on node when taint value is higher than "
            "threshold"
        ),
        "tolerations": [
            {
                "key": "node.example.com/priority-level",
                "operator": "Lt",
                "value": "800",
                "effect": "NoSchedule",
            }
        ],
        "taints": [
            {
                "key": "node.example.com/priority-level",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "want": False,
    },
    {
        "name": (
            "Pod with Lt toleration can be scheduled on node when taint value is lower than "
            "threshold"
        ),
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Lt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}],
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "name": "Pod with Gt toleration cannot be scheduled on node with non-numeric taint value",
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"}],
        "want": False,
    },
]

# TestTaintTolerationFilterWithFeatureGate, same file, current upstream only: `gate` is the
# TaintTolerationComparisonOperators feature gate; we behave as with it off.
TAINT_TOLERATION_FILTER_WITH_FEATURE_GATE: Final[list[Row]] = [
    {
        "name": (
            "Pod with Gt toleration can be scheduled when feature gate is enabled and taint value "
            "is higher"
        ),
        "gate": True,
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "750",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}],
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "name": "Pod with Gt toleration cannot be scheduled when feature gate is disabled",
        "gate": False,
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "750",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}],
        "want": False,
    },
    {
        "name": (
            "Pod with Lt toleration can be scheduled when feature gate is enabled and taint value "
            "is lower"
        ),
        "gate": True,
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Lt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}],
        "want": True,
        "ours": False,
        "why": (
            "Gt/Lt tolerations are alpha (TaintTolerationComparisonOperators, off by default; a "
            "1.20 API server refuses them): we follow 1.20 and the default, they match nothing"
        ),
    },
    {
        "name": "Pod with Lt toleration cannot be scheduled when feature gate is disabled",
        "gate": False,
        "tolerations": [
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Lt",
                "value": "950",
                "effect": "NoSchedule",
            }
        ],
        "taints": [{"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}],
        "want": False,
    },
    {
        "name": (
            "Pod with mixed tolerations (Equal and Gt) when feature gate is disabled - only Equal "
            "is honored"
        ),
        "gate": False,
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "750",
                "effect": "NoSchedule",
            },
        ],
        "taints": [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        "want": True,
    },
    {
        "name": (
            "Pod with mixed tolerations, Gt toleration needed but filtered out when feature gate "
            "is disabled"
        ),
        "gate": False,
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/sla",
                "operator": "Gt",
                "value": "750",
                "effect": "NoSchedule",
            },
        ],
        "taints": [
            {"key": "dedicated", "value": "user1", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        ],
        "want": False,
    },
]

# TestNodeUnschedulable,
# pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable_test.go, v1.20.2 and current
# upstream (identical rows): a cordon is the taint node.kubernetes.io/unschedulable:NoSchedule to
# blocking_taints.
NODE_UNSCHEDULABLE: Final[list[Row]] = [
    {
        "name": "Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
        "tolerations": [],
        "unschedulable": True,
        "want": False,
    },
    {
        "name": "Schedule pod to normal node",
        "tolerations": [],
        "unschedulable": False,
        "want": True,
    },
    {
        "name": (
            "Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)"
        ),
        "tolerations": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
        "unschedulable": True,
        "want": True,
    },
]
