"""Kubernetes' own test tables for node selection (nodeSelector, required node affinity,
label requirements), ported as data: each table names its upstream file, test function and
version; rows keep upstream's case names. Rows of the v1.20.2 tables were dumped from the
Go tests themselves; rows only current upstream has were transcribed.
"""

from __future__ import annotations

from typing import Any, Final

Row = dict[str, Any]

# TestPodMatchesNodeSelectorAndAffinityTerms, Kubernetes v1.20.2
# pkg/scheduler/framework/plugins/helper/node_affinity_test.go; the same 27 rows stand in current
# upstream staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity_test.go
# (GetRequiredNodeAffinity(pod).Match). Checked with node_matches(pod, labels, node_name).
POD_MATCHES_NODE_SELECTOR_AND_AFFINITY_TERMS: Final[list[Row]] = [
    {"name": "no selector", "pod": {"spec": {}}, "labels": {}, "node_name": "", "want": True},
    {
        "name": "missing labels",
        "pod": {"spec": {"nodeSelector": {"foo": "bar"}}},
        "labels": {},
        "node_name": "",
        "want": False,
    },
    {
        "name": "same labels",
        "pod": {"spec": {"nodeSelector": {"foo": "bar"}}},
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "node labels are superset",
        "pod": {"spec": {"nodeSelector": {"foo": "bar"}}},
        "labels": {"baz": "blah", "foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "node labels are subset",
        "pod": {"spec": {"nodeSelector": {"baz": "blah", "foo": "bar"}}},
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": False,
    },
    {
        "name": "Pod with matchExpressions using In operator that matches the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "foo",
                                            "operator": "In",
                                            "values": ["bar", "value2"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with matchExpressions using Gt operator that matches the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kernel-version",
                                            "operator": "Gt",
                                            "values": ["0204"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"kernel-version": "0206"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with matchExpressions using NotIn operator that matches the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "mem-type",
                                            "operator": "NotIn",
                                            "values": ["DDR", "DDR2"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"mem-type": "DDR3"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with matchExpressions using Exists operator that matches the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [{"key": "GPU", "operator": "Exists"}],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"GPU": "NVIDIA-GRID-K1"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with affinity that don't match node's labels won't schedule onto the node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "foo",
                                            "operator": "In",
                                            "values": ["value1", "value2"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": False,
    },
    {
        "name": (
            "Pod with a nil []NodeSelectorTerm in affinity, can't match the node's labels and "
            "won't schedule onto the node"
        ),
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": None
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": False,
    },
    {
        "name": (
            "Pod with an empty []NodeSelectorTerm in affinity, can't match the node's labels and "
            "won't schedule onto the node"
        ),
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []},
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": False,
    },
    {
        "name": (
            "Pod with empty MatchExpressions is not a valid value will match no objects and won't "
            "schedule onto the node"
        ),
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{}]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": False,
    },
    {
        "name": "Pod with no Affinity will schedule onto a node",
        "pod": {"spec": {}},
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with Affinity but nil NodeSelector will schedule onto a node",
        "pod": {"spec": {"affinity": {"nodeAffinity": {}}}},
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with multiple matchExpressions ANDed that matches the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "GPU", "operator": "Exists"},
                                        {
                                            "key": "GPU",
                                            "operator": "NotIn",
                                            "values": ["AMD", "INTER"],
                                        },
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"GPU": "NVIDIA-GRID-K1"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Pod with multiple matchExpressions ANDed that doesn't match the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "GPU", "operator": "Exists"},
                                        {
                                            "key": "GPU",
                                            "operator": "In",
                                            "values": ["AMD", "INTER"],
                                        },
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"GPU": "NVIDIA-GRID-K1"},
        "node_name": "",
        "want": False,
    },
    {
        "name": (
            "Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and "
            "will schedule onto the node"
        ),
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "foo",
                                            "operator": "In",
                                            "values": ["bar", "value2"],
                                        }
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "diffkey",
                                            "operator": "In",
                                            "values": ["wrong", "value2"],
                                        }
                                    ]
                                },
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": (
            "Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we are "
            "deprecating) both are satisfied, will schedule onto the node"
        ),
        "pod": {
            "spec": {
                "nodeSelector": {"foo": "bar"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
                            ],
                        }
                    }
                },
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": True,
    },
    {
        "name": (
            "Pod with an Affinity matches node's labels but the PodSpec.NodeSelector(the old thing "
            "that we are deprecating) is not satisfied, won't schedule onto the node"
        ),
        "pod": {
            "spec": {
                "nodeSelector": {"foo": "bar"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
                            ],
                        }
                    }
                },
            }
        },
        "labels": {"foo": "barrrrrr"},
        "node_name": "",
        "want": False,
    },
    {
        "name": "Pod with an invalid value in Affinity term won't be scheduled onto the node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "foo",
                                            "operator": "NotIn",
                                            "values": ["invalid value: ___@#$%^"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "",
        "want": False,
    },
    {
        "name": "Pod with matchFields using In operator that matches the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node_1"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {},
        "node_name": "node_1",
        "want": True,
    },
    {
        "name": "Pod with matchFields using In operator that does not match the existing node",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node_1"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {},
        "node_name": "node_2",
        "want": False,
    },
    {
        "name": "Pod with two terms: matchFields does not match, but matchExpressions matches",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node_1"],
                                        }
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {"key": "foo", "operator": "In", "values": ["bar"]}
                                    ]
                                },
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "node_2",
        "want": True,
    },
    {
        "name": "Pod with one term: matchFields does not match, but matchExpressions matches",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "foo", "operator": "In", "values": ["bar"]}
                                    ],
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node_1"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "node_2",
        "want": False,
    },
    {
        "name": "Pod with one term: both matchFields and matchExpressions match",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "foo", "operator": "In", "values": ["bar"]}
                                    ],
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node_1"],
                                        }
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "node_1",
        "want": True,
    },
    {
        "name": "Pod with two terms: both matchFields and matchExpressions do not match",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node_1"],
                                        }
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "foo",
                                            "operator": "In",
                                            "values": ["not-match-to-bar"],
                                        }
                                    ]
                                },
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "node_2",
        "want": False,
    },
]

# TestNodeAffinity, pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go, the rows
# with a scheduler-profile addedAffinity (the same in v1.20.2 and current upstream). The table's
# other rows are those of POD_MATCHES_NODE_SELECTOR_AND_AFFINITY_TERMS (v1.20.2: all 27, checked
# equal when ported; current upstream: 23 of them, with node_1/node_2 renamed node1/node2) or in
# NODE_AFFINITY_SINCE_1_20. `want` is the filter's outcome, `ours` ours where it differs.
NODE_AFFINITY_ADDED_AFFINITY: Final[list[Row]] = [
    {
        "name": "Matches added affinity and Pod's node affinity",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["foo"]}
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"zone": "foo"},
        "node_name": "node_2",
        "added_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node_2"]}
                        ]
                    },
                ]
            }
        },
        "want": True,
    },
    {
        "name": "Matches added affinity but not Pod's node affinity",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["bar"]}
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"zone": "foo"},
        "node_name": "node_2",
        "added_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node_2"]}
                        ]
                    },
                ]
            }
        },
        "want": False,
    },
    {
        "name": "Doesn't match added affinity",
        "pod": {"spec": {}},
        "labels": {"zone": "foo"},
        "node_name": "node_2",
        "added_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["bar"]}]},
                ]
            }
        },
        "want": False,
        "ours": True,
        "why": (
            "addedAffinity is a kube-scheduler profile setting (NodeAffinityArgs), not part of the "
            "Pod: we place by the Pod's own rules only"
        ),
    },
]

# TestNodeAffinity, current upstream (kubernetes/kubernetes 022462cc)
# pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go: the rows added or changed
# since v1.20.2, filter outcome only (PreFilter's node-name shortcut and conflict status end in the
# same verdict).
NODE_AFFINITY_SINCE_1_20: Final[list[Row]] = [
    {
        "name": "Pod with two terms: matchFields does not match, but matchExpressions matches",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node1"],
                                        },
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node2"],
                                        },
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {"key": "foo", "operator": "In", "values": ["bar"]}
                                    ]
                                },
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "node2",
        "want": True,
    },
    {
        "name": "Pod with two terms of node.Name affinity",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node1"],
                                        }
                                    ]
                                },
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node2"],
                                        }
                                    ]
                                },
                            ]
                        },
                    }
                }
            }
        },
        "labels": {},
        "node_name": "node2",
        "want": True,
    },
    {
        "name": "Pod with two conflicting mach field requirements",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node1"],
                                        },
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node2"],
                                        },
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"foo": "bar"},
        "node_name": "node2",
        "want": False,
    },
    {
        "name": "Matches node selector correctly even if PreFilter is not called",
        "pod": {"spec": {"nodeSelector": {"foo": "bar"}}},
        "labels": {"foo": "bar", "baz": "blah"},
        "node_name": "",
        "want": True,
    },
    {
        "name": "Matches node affinity correctly even if PreFilter is not called",
        "pod": {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "GPU", "operator": "Exists"},
                                        {
                                            "key": "GPU",
                                            "operator": "NotIn",
                                            "values": ["AMD", "INTER"],
                                        },
                                    ],
                                }
                            ]
                        },
                    }
                }
            }
        },
        "labels": {"GPU": "NVIDIA-GRID-K1"},
        "node_name": "",
        "want": True,
    },
]

# TestMatchNodeSelectorTerms,
# staging/src/k8s.io/component-helpers/scheduling/corev1/helpers_test.go, v1.20.2 and current
# upstream (identical). Checked with node_selector_matches(node_selector, labels, name); a null node
# is node_labels None.
MATCH_NODE_SELECTOR_TERMS: Final[list[Row]] = [
    {"name": "nil terms", "node_selector": None, "node": None, "want": False},
    {
        "name": "node label matches matchExpressions terms",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_1_val"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "", "labels": {"label_1": "label_1_val"}},
        "want": True,
    },
    {
        "name": "node field matches matchFields terms",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
        "want": True,
    },
    {
        "name": "invalid node field requirement",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1", "host_2"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
        "want": False,
    },
    {
        "name": "fieldSelectorTerm with node labels",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "not_host_1", "labels": {"metadata.name": "host_1"}},
        "want": False,
    },
    {
        "name": "labelSelectorTerm with node fields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
        "want": False,
    },
    {
        "name": "labelSelectorTerm and fieldSelectorTerm was set, but only node fields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["host_1"]}
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
        "want": False,
    },
    {
        "name": (
            "labelSelectorTerm and fieldSelectorTerm was set, both node fields and labels (both "
            "matched)"
        ),
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["host_1"]}
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val"}},
        "want": True,
    },
    {
        "name": (
            "labelSelectorTerm and fieldSelectorTerm was set, both node fields and labels (one "
            "mismatched)"
        ),
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["host_1"]}
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val-failed"}},
        "want": False,
    },
    {
        "name": "multi-selector was set, both node fields and labels (one mismatched)",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ]
                },
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["host_1"]}]},
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val-failed"}},
        "want": True,
    },
]

# TestMatchNodeSelectorTermsStateless, same file and versions: matching must not modify the selector
# (upstream's `want` is the input itself).
MATCH_NODE_SELECTOR_TERMS_STATELESS: Final[list[Row]] = [
    {"name": "nil terms", "node_selector": None, "node": None},
    {
        "name": "nodeLabels: preordered matchExpressions and nil matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_1_val", "label_2_val"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "", "labels": {"label_1": "label_1_val"}},
    },
    {
        "name": "nodeLabels: unordered matchExpressions and nil matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_2_val", "label_1_val"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "", "labels": {"label_1": "label_1_val"}},
    },
    {
        "name": "nodeFields: nil matchExpressions and preordered matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1", "host_2"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
    },
    {
        "name": "nodeFields: nil matchExpressions and unordered matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_2", "host_1"],
                        }
                    ]
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
    },
    {
        "name": "nodeLabels and nodeFields: ordered matchExpressions and ordered matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_1_val", "label_2_val"],
                        }
                    ],
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1", "host_2"],
                        }
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val"}},
    },
    {
        "name": "nodeLabels and nodeFields: ordered matchExpressions and unordered matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_1_val", "label_2_val"],
                        }
                    ],
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_2", "host_1"],
                        }
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val"}},
    },
    {
        "name": "nodeLabels and nodeFields: unordered matchExpressions and ordered matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_2_val", "label_1_val"],
                        }
                    ],
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1", "host_2"],
                        }
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val"}},
    },
    {
        "name": "nodeLabels and nodeFields: unordered matchExpressions and unordered matchFields",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_2_val", "label_1_val"],
                        }
                    ],
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_2", "host_1"],
                        }
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val"}},
    },
]

# TestNodeSelectorMatch, staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/
# nodeaffinity_test.go, v1.20.2 and current upstream (identical rows). NewNodeSelector reports every
# invalid requirement (`want_errors`, the upstream error paths); Match is lazy about them.
NODE_SELECTOR_MATCH: Final[list[Row]] = [
    {
        "name": "nil node",
        "node_selector": {"nodeSelectorTerms": None},
        "node": None,
        "want_errors": [],
        "want_match": False,
    },
    {
        "name": "invalid field selector and label selector",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": "metadata.name",
                            "operator": "In",
                            "values": ["host_1", "host_2"],
                        }
                    ]
                },
                {
                    "matchExpressions": [
                        {
                            "key": "label_1",
                            "operator": "In",
                            "values": ["label_1_val"],
                        }
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["host_1"]}
                    ],
                },
                {
                    "matchExpressions": [
                        {
                            "key": "invalid key",
                            "operator": "In",
                            "values": ["label_value"],
                        }
                    ]
                },
            ]
        },
        "node": None,
        "want_errors": [
            "nodeSelectorTerms[0].matchFields[0]",
            "nodeSelectorTerms[2].matchExpressions[0]",
        ],
        "want_match": False,
    },
    {
        "name": "node matches field selector, but not labels",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["host_1"]}
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {}},
        "want_errors": [],
        "want_match": False,
    },
    {
        "name": "node matches field selector and label selector",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["host_1"]}
                    ],
                }
            ]
        },
        "node": {"name": "host_1", "labels": {"label_1": "label_1_val"}},
        "want_errors": [],
        "want_match": True,
    },
    {
        "name": "second term matches",
        "node_selector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "label_1", "operator": "In", "values": ["label_1_val"]}
                    ]
                },
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["host_1"]}]},
            ]
        },
        "node": {"name": "host_1", "labels": {}},
        "want_errors": [],
        "want_match": True,
    },
]

# TestNodeSelectorRequirementsAsSelector, same file, v1.20.2 and current upstream (identical). `out`
# is the upstream selector as text (None: an error; "": labels.Nothing()).
NODE_SELECTOR_REQUIREMENTS_AS_SELECTOR: Final[list[Row]] = [
    {"in": None, "out": "", "want_error": False},
    {"in": [], "out": "", "want_error": False},
    {
        "in": [{"key": "foo", "operator": "In", "values": ["bar", "baz"]}],
        "out": "foo in (bar,baz)",
        "want_error": False,
    },
    {
        "in": [{"key": "foo", "operator": "Exists", "values": ["bar", "baz"]}],
        "out": None,
        "want_error": True,
    },
    {
        "in": [{"key": "foo", "operator": "Gt", "values": ["1"]}],
        "out": "foo>1",
        "want_error": False,
    },
    {
        "in": [{"key": "bar", "operator": "Lt", "values": ["7"]}],
        "out": "bar<7",
        "want_error": False,
    },
]

# TestRequirementConstructor, staging/src/k8s.io/apimachinery/pkg/labels/selector_test.go, v1.20.2
# (the kubernetes/kubernetes copy at 01d7e53f has the same rows). `selection_operator` is the labels
# operator, `operator` its NodeSelectorOperator.
REQUIREMENT_CONSTRUCTOR: Final[list[Row]] = [
    {"key": "x", "selection_operator": "in", "operator": "In", "values": None, "valid": False},
    {"key": "x", "selection_operator": "notin", "operator": "NotIn", "values": [], "valid": False},
    {"key": "x", "selection_operator": "in", "operator": "In", "values": ["foo"], "valid": True},
    {
        "key": "x",
        "selection_operator": "notin",
        "operator": "NotIn",
        "values": ["foo"],
        "valid": True,
    },
    {
        "key": "x",
        "selection_operator": "exists",
        "operator": "Exists",
        "values": None,
        "valid": True,
    },
    {
        "key": "x",
        "selection_operator": "!",
        "operator": "DoesNotExist",
        "values": None,
        "valid": True,
    },
    {"key": "1foo", "selection_operator": "in", "operator": "In", "values": ["bar"], "valid": True},
    {"key": "1234", "selection_operator": "in", "operator": "In", "values": ["bar"], "valid": True},
    {"key": "y", "selection_operator": "gt", "operator": "Gt", "values": ["1"], "valid": True},
    {"key": "z", "selection_operator": "lt", "operator": "Lt", "values": ["6"], "valid": True},
    {"key": "foo", "selection_operator": "gt", "operator": "Gt", "values": ["bar"], "valid": False},
    {
        "key": "barz",
        "selection_operator": "lt",
        "operator": "Lt",
        "values": ["blah"],
        "valid": False,
    },
    {
        "key": "a" * 254,
        "selection_operator": "exists",
        "operator": "Exists",
        "values": None,
        "valid": False,
    },
]

# TestRequirementConstructor in its newer upstream form (keys x1..x18, WantErr lists), as mirrored
# by forks of kubernetes/kubernetes (the copy available here is the older form above). `valid` is
# what NewRequirement returns for the row (current kubernetes/kubernetes 008b3652 selector.go, also
# checked with v1.20.2's).
REQUIREMENT_CONSTRUCTOR_NEWER: Final[list[Row]] = [
    {"key": "x1", "selection_operator": "in", "operator": "In", "values": None, "valid": False},
    {"key": "x2", "selection_operator": "notin", "operator": "NotIn", "values": [], "valid": False},
    {"key": "x3", "selection_operator": "in", "operator": "In", "values": ["foo"], "valid": True},
    {
        "key": "x4",
        "selection_operator": "notin",
        "operator": "NotIn",
        "values": ["foo"],
        "valid": True,
    },
    {
        "key": "x5",
        "selection_operator": "=",
        "operator": "=",
        "values": ["bar", "foo"],
        "valid": False,
        "ours_valid": False,
        "why": (
            "= == != are label-query operators with no NodeSelectorOperator or "
            "LabelSelectorOperator: a requirement with one is invalid for us"
        ),
    },
    {
        "key": "x6",
        "selection_operator": "exists",
        "operator": "Exists",
        "values": None,
        "valid": True,
    },
    {
        "key": "x7",
        "selection_operator": "!",
        "operator": "DoesNotExist",
        "values": None,
        "valid": True,
    },
    {
        "key": "x8",
        "selection_operator": "exists",
        "operator": "Exists",
        "values": ["foo"],
        "valid": False,
    },
    {"key": "x9", "selection_operator": "in", "operator": "In", "values": ["bar"], "valid": True},
    {"key": "x10", "selection_operator": "in", "operator": "In", "values": ["bar"], "valid": True},
    {"key": "x11", "selection_operator": "gt", "operator": "Gt", "values": ["1"], "valid": True},
    {"key": "x12", "selection_operator": "lt", "operator": "Lt", "values": ["6"], "valid": True},
    {"key": "x13", "selection_operator": "gt", "operator": "Gt", "values": None, "valid": False},
    {"key": "x14", "selection_operator": "gt", "operator": "Gt", "values": ["bar"], "valid": False},
    {"key": "x15", "selection_operator": "lt", "operator": "Lt", "values": ["bar"], "valid": False},
    {
        "key": "a" * 254,
        "selection_operator": "exists",
        "operator": "Exists",
        "values": None,
        "valid": False,
    },
    {
        "key": "x16",
        "selection_operator": "=",
        "operator": "=",
        "values": ["a" * 254],
        "valid": False,
        "ours_valid": False,
        "why": (
            "= == != are label-query operators with no NodeSelectorOperator or "
            "LabelSelectorOperator: a requirement with one is invalid for us"
        ),
    },
    {
        "key": "x17",
        "selection_operator": "=",
        "operator": "=",
        "values": ["a b"],
        "valid": False,
        "ours_valid": False,
        "why": (
            "= == != are label-query operators with no NodeSelectorOperator or "
            "LabelSelectorOperator: a requirement with one is invalid for us"
        ),
    },
    {
        "key": "x18",
        "selection_operator": "unsupportedOp",
        "operator": "unsupportedOp",
        "values": None,
        "valid": False,
    },
]

# TestRequirementSelectorMatching, same file, v1.20.2 and kubernetes/kubernetes 01d7e53f
# (identical); getRequirement(key, op, values) as a requirement dict, `{}` for the zero Requirement.
REQUIREMENT_SELECTOR_MATCHING: Final[list[Row]] = [
    {"labels": {"x": "foo", "y": "baz"}, "requirements": [{}], "match": False},
    {
        "labels": {"x": "foo", "y": "baz"},
        "requirements": [
            {"key": "x", "operator": "In", "values": ["foo"]},
            {"key": "y", "operator": "NotIn", "values": ["alpha"]},
        ],
        "match": True,
    },
    {
        "labels": {"x": "foo", "y": "baz"},
        "requirements": [
            {"key": "x", "operator": "In", "values": ["foo"]},
            {"key": "y", "operator": "In", "values": ["alpha"]},
        ],
        "match": False,
    },
    {
        "labels": {"y": ""},
        "requirements": [
            {"key": "x", "operator": "NotIn", "values": [""]},
            {"key": "y", "operator": "Exists"},
        ],
        "match": True,
    },
    {
        "labels": {"y": ""},
        "requirements": [
            {"key": "x", "operator": "DoesNotExist"},
            {"key": "y", "operator": "Exists"},
        ],
        "match": True,
    },
    {
        "labels": {"y": ""},
        "requirements": [
            {"key": "x", "operator": "NotIn", "values": [""]},
            {"key": "y", "operator": "DoesNotExist"},
        ],
        "match": False,
    },
    {
        "labels": {"y": "baz"},
        "requirements": [{"key": "x", "operator": "In", "values": [""]}],
        "match": False,
    },
    {
        "labels": {"z": "2"},
        "requirements": [{"key": "z", "operator": "Gt", "values": ["1"]}],
        "match": True,
    },
    {
        "labels": {"z": "v2"},
        "requirements": [{"key": "z", "operator": "Gt", "values": ["1"]}],
        "match": False,
    },
]
