"""The policy benchmark's Pods: as the scheduler holds them, some breaking rules on purpose."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.harness.apiserver import SERVER_TIME, container_defaults, managed_entry
from reconciler import wellknown as wk

KILL_WAIT = 30
SCHEDULER_NAME = "slurm-scheduler"

# ---- the Pods ---------------------------------------------------------------------------------

NAMESPACES: dict[str, dict[str, str]] = {
    "ml-train": {"team": "ml", "tier": "prod", "cost-center": "cc-100"},
    "ml-infer": {"team": "ml", "workload": "inference", "tier": "prod", "cost-center": "cc-200"},
    "research": {"team": "research", "cost-center": "cc-300"},
    "dev-sandbox": {"tier": "dev"},
    "batch": {},
}
# A violation planted in a Pod -> the policy that must find it. admit() refuses the last three.
VIOLATIONS: dict[str, str] = {
    "cpu-limit": "cpu-limit-at-most-64",
    "memory-ratio": "memory-limit-at-most-4x-request",
    "gpu-count": "gpus-whole-and-at-most-8",
    "pod-cpu": "pod-cpu-at-most-128",
    "no-team": "team-label",
    "wrong-team": "team-label-matches-namespace",
    "no-account": "account-of-the-cost-center",
    "root-inference": "pod-user-id-allowed",  # shipped; the repo's inference-no-root-user too
    "no-timeout": "prod-pods-set-a-timeout",
    "long-timeout": "dev-pods-short-timeout",
    "bad-partition": "partition-exists",
    "gpu-partition": "gpu-pods-in-the-gpu-partition",
    "registry": "images-from-approved-registries",
    "latest": "images-pinned",
    "privileged": "no-privileged-containers",
    "host-network": "no-host-network",
    "env-case": "env-names-upper-case",
    "long-comment": "comment-at-most-120",
    "bad-excluded": "excluded-nodes-exist",
    "priority": "pod-priority-at-most-max",  # shipped; the repo's priority-at-most-1000 too
    "no-requests": "pod-requests-cpu-and-memory",
    "grace": "pod-grace-below-kill-wait",
    "bad-integer": "pod-integer-annotations",
}
REFUSED_BY_ADMIT = frozenset({"no-requests", "grace", "bad-integer"})
# Matches Pods of the default scheduler only, which the scheduler's watch never delivers.
NEVER_FIRES_HERE = frozenset({"pod-not-on-slurm-nodes-by-default-scheduler"})
# Violations that need a namespace of a kind: the Pod moves there.
NEEDS_NAMESPACE = {
    "wrong-team": ("ml-train", "research"),
    "no-account": ("ml-train", "research"),
    "root-inference": ("ml-infer",),
    "no-timeout": ("ml-train", "ml-infer"),
    "long-timeout": ("dev-sandbox",),
}
# Violations that set the same field (at most one of each group per Pod).
EXCLUSIVE = (
    frozenset({"no-timeout", "long-timeout", "bad-integer"}),
    frozenset({"no-team", "wrong-team"}),
    frozenset({"pod-cpu", "cpu-limit"}),
    frozenset({"no-requests", "memory-ratio"}),
)
MAIN_IMAGES = (
    "registry.example.com/ml/train:2024.05.1",
    "registry.example.com/ml/serve:3.2.0",
    "ghcr.io/coreweave/nccl-tests:12.4.1-cudnn9-devel",
    "registry.example.com/hpc/openfoam:11",
)
SIDECARS = (
    ("log-shipper", "registry.example.com/infra/fluent-bit:2.2.2"),
    ("metrics", "registry.example.com/infra/dcgm-exporter:3.3.5"),
    ("proxy", "ghcr.io/coreweave/auth-proxy:1.8.0"),
)


@dataclass
class Sample:
    """One synthetic Pod, its Namespace, and what was planted in it."""

    pod: dict[str, Any]
    namespace: dict[str, Any]
    violations: tuple[str, ...]
    containers: int
    sibling: dict[str, Any]  # another replica of the same template: other name, uid, version


def namespace_object(name: str, labels: Mapping[str, str], serial: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": _uid("Namespace", name),
        "resourceVersion": str(100 + serial),
        "creationTimestamp": SERVER_TIME,
    }
    if labels:
        meta["labels"] = dict(labels)
    fields = {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}} if labels else {}
    meta["managedFields"] = [_managed("kubectl-create", fields)]
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def make_samples(count: int, seed: int) -> list[Sample]:
    """`count` Pods; about half break one or two rules, and every rule is broken by some Pod
    (when there are at least as many Pods as rules)."""
    rng = random.Random(seed)
    namespaces = {
        name: namespace_object(name, labels, i)
        for i, (name, labels) in enumerate(NAMESPACES.items())
    }
    kinds = list(VIOLATIONS)
    samples = []
    for index in range(count):
        if index < len(kinds):  # every rule broken at least once, by a Pod of its own
            planted: tuple[str, ...] = (kinds[index],)
        elif rng.random() < 0.45:
            planted = tuple(rng.sample(kinds, rng.choice((1, 1, 2))))
            while not _compatible(planted):
                planted = tuple(rng.sample(kinds, 2))
        else:
            planted = ()
        samples.append(_sample(index, planted, rng, namespaces))
    return samples


def _compatible(planted: Sequence[str]) -> bool:
    """Two violations that can live in one Pod (not two values of one field, one namespace)."""
    if any(len(set(planted) & group) > 1 for group in EXCLUSIVE):
        return False
    rooms = [set(NEEDS_NAMESPACE[v]) for v in planted if v in NEEDS_NAMESPACE]
    return not rooms or bool(set.intersection(*rooms))


def _sample(
    index: int, planted: tuple[str, ...], rng: random.Random, namespaces: Mapping[str, Any]
) -> Sample:
    rooms = [set(NEEDS_NAMESPACE[v]) for v in planted if v in NEEDS_NAMESPACE]
    ns_name = rng.choice(sorted(set.intersection(*rooms)) if rooms else list(NAMESPACES))
    ns_labels = NAMESPACES[ns_name]
    name = f"job-{index:04d}-{rng.randrange(16**5):05x}"
    v = set(planted)
    gpus = (
        rng.choice((1, 2, 4, 8)) if rng.random() < 0.3 or v & {"gpu-count", "gpu-partition"} else 0
    )
    n_containers = rng.choices((1, 2, 3, 4), weights=(40, 30, 20, 10))[0]
    guaranteed = rng.random() < 0.3
    containers = [_main_container(rng, gpus, guaranteed, v)]
    for side_name, image in SIDECARS[: n_containers - 1]:
        containers.append(
            _sidecar(
                side_name, image, guaranteed, "no-requests" in v and side_name == "log-shipper"
            )
        )
    if "no-requests" in v and n_containers == 1:
        # A limit alone counts as the request (the API server defaults it to the limit), so the
        # Pod asks for no memory only with neither.
        del containers[0]["resources"]["requests"]["memory"]
        containers[0]["resources"].get("limits", {}).pop("memory", None)
    if "registry" in v:
        containers[-1]["image"] = "docker.io/library/python:3.11-slim"
    if "latest" in v:
        containers[-1]["image"] = containers[-1]["image"].rsplit(":", 1)[0] + ":latest"
    if "privileged" in v:
        containers[0]["securityContext"] = {"privileged": True}
    if "env-case" in v:
        containers[0]["env"].append({"name": "http_proxy", "value": "http://proxy:3128"})
    if "pod-cpu" in v:
        containers[0]["resources"]["requests"]["cpu"] = "130"
        if "cpu" in containers[0]["resources"].get("limits", {}):
            containers[0]["resources"]["limits"]["cpu"] = "130"  # a request is at most the limit

    labels = {
        "app.kubernetes.io/name": name.rsplit("-", 1)[0],
        "app.kubernetes.io/part-of": "training",
    }
    team = ns_labels.get("team") or rng.choice(("platform", "data", "hpc"))
    if "no-team" not in v:
        labels["team"] = "vision" if "wrong-team" in v else team
    annotations = _annotations(rng, ns_name, ns_labels, team, gpus, v)

    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 60 if "grace" in v else rng.choice((5, 10, 20)),
        "containers": containers,
    }
    if "host-network" in v:
        spec["hostNetwork"] = True
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"node.coreweave.cloud/class": "gpu" if gpus else "cpu"}
    metadata: dict[str, Any] = {"name": name, "namespace": ns_name, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    pod = server_pod(body)
    sibling = server_pod({**body, "metadata": {**metadata, "name": name + "-r1"}})
    return Sample(pod, namespaces[ns_name], planted, len(containers), sibling)


def _main_container(rng: random.Random, gpus: int, guaranteed: bool, v: set[str]) -> dict[str, Any]:
    cpu = rng.choice(("500m", "1", "2", "4", "8", "16", "32"))
    memory = rng.choice(("512Mi", "2Gi", "8Gi", "32Gi", "64Gi"))
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    limits: dict[str, Any] = {}
    if guaranteed:
        limits = {"cpu": cpu, "memory": memory}
    elif rng.random() < 0.4:
        limits = {"memory": _times(memory, 2)}
    if "cpu-limit" in v:
        limits["cpu"] = "96"
    if "memory-ratio" in v:
        limits["memory"] = _times(memory, 8)
    if gpus:
        count = "16" if "gpu-count" in v else str(gpus)
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = count
    env = [
        {"name": "OMP_NUM_THREADS", "value": "8"},
        {"name": "NCCL_DEBUG", "value": "WARN"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    env = env[: rng.randint(1, 3)]
    container: dict[str, Any] = {
        "name": "main",
        "image": rng.choice(MAIN_IMAGES),
        "command": ["/bin/sh", "-c", "exec python -m train --config /etc/job/config.yaml"],
        "env": env,
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }
    if rng.random() < 0.5:
        container["ports"] = [{"containerPort": 8080, "name": "metrics"}]
    return container


def _sidecar(name: str, image: str, guaranteed: bool, no_requests: bool) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "128Mi"}
    resources: dict[str, Any] = {} if no_requests else {"requests": requests}
    if guaranteed and not no_requests:
        resources["limits"] = dict(requests)
    return {
        "name": name,
        "image": image,
        "args": ["--config", f"/etc/{name}/config"],
        "resources": resources,
    }


def _times(memory: str, factor: int) -> str:
    number = "".join(ch for ch in memory if ch.isdigit())
    return f"{int(number) * factor}{memory[len(number) :]}"


def _annotations(
    rng: random.Random,
    ns_name: str,
    ns_labels: Mapping[str, str],
    team: str,
    gpus: int,
    v: set[str],
) -> dict[str, str]:
    prod = ns_labels.get("tier") == "prod"
    billed = "cost-center" in ns_labels
    if (
        not (prod or billed or v & set(VIOLATIONS) - {"no-team", "wrong-team"})
        and rng.random() < 0.5
    ):
        return {}  # plain Pods in the unbilled namespaces carry no annotations at all
    a: dict[str, str] = {}
    if rng.random() < 0.3:
        a["kubectl.kubernetes.io/default-container"] = "main"
    if billed and "no-account" not in v:
        a[wk.ANNOTATION_ACCOUNT] = f"{ns_labels['cost-center']}-{team}"
    elif not billed and rng.random() < 0.3:
        a[wk.ANNOTATION_ACCOUNT] = team
    if "no-timeout" not in v and (prod or rng.random() < 0.3):
        a[wk.ANNOTATION_TIMEOUT] = rng.choice(("60", "120", "240"))
    if "long-timeout" in v:
        a[wk.ANNOTATION_TIMEOUT] = "600"
    if "bad-integer" in v:
        a[wk.ANNOTATION_TIMEOUT] = "two hours"
    if gpus and "gpu-partition" not in v:
        a[wk.ANNOTATION_PARTITION] = "gpu"
    elif gpus or rng.random() < 0.5:
        a[wk.ANNOTATION_PARTITION] = rng.choice(("cpu", "debug", "preempt"))
    if "bad-partition" in v:
        a[wk.ANNOTATION_PARTITION] = "Huge"
    if rng.random() < 0.3 or "priority" in v:
        a[wk.ANNOTATION_PRIORITY] = "5000" if "priority" in v else rng.choice(("10", "100", "900"))
    if rng.random() < 0.3 or "long-comment" in v:
        a[wk.ANNOTATION_COMMENT] = ("x" * 200) if "long-comment" in v else f"{team} run {ns_name}"
    if rng.random() < 0.15 or "bad-excluded" in v:
        a[wk.ANNOTATION_EXCLUDED_NODES] = (
            "gpu-[1-2],node-7" if "bad-excluded" in v else "gpu-[1-2],cpu-3"
        )
    if ns_name == "ml-infer" or rng.random() < 0.2:
        a[wk.ANNOTATION_USER_ID] = "0" if "root-inference" in v else "1000"
    if gpus and rng.random() < 0.5:
        a[wk.ANNOTATION_EXCLUSIVE] = "user"
    return a


def server_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` as the scheduler holds it, from kube-apiserver 1.20 before it is bound: server
    metadata, the defaults, a service account token volume, Pending; no managedFields (the
    scheduler drops them from every object it watches, loop._slimmed)."""
    out: dict[str, Any] = json.loads(json.dumps(pod))
    meta, spec = out["metadata"], out["spec"]
    meta.update(
        uid=_uid("Pod", meta["name"]),
        resourceVersion=str(5000 + len(meta["name"])),
        creationTimestamp=SERVER_TIME,
    )
    token = f"default-token-{meta['namespace'][:5]}"
    for key, value in (
        ("restartPolicy", "Always"),
        ("dnsPolicy", "ClusterFirst"),
        ("serviceAccountName", "default"),
        ("serviceAccount", "default"),
        ("securityContext", {}),
        ("priority", 0),
        ("enableServiceLinks", True),
        ("preemptionPolicy", "PreemptLowerPriority"),
    ):
        spec.setdefault(key, value)
    spec["tolerations"] = [
        {
            "key": f"node.kubernetes.io/{what}",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
        for what in ("not-ready", "unreachable")
    ]
    spec["volumes"] = [{"name": token, "secret": {"secretName": token, "defaultMode": 420}}]
    qos = "BestEffort"
    for container in spec["containers"]:
        resources = container.setdefault("resources", {})
        if resources.get("requests") or resources.get("limits"):
            qos = "Burstable"
        container_defaults(container)
        container["volumeMounts"] = [
            {
                "name": token,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ]
    if all(_guaranteed(c) for c in spec["containers"]):
        qos = "Guaranteed"
    out["status"] = {"phase": "Pending", "qosClass": qos}
    return out


def _guaranteed(container: Mapping[str, Any]) -> bool:
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    return all(r in limits and requests.get(r, limits[r]) == limits[r] for r in ("cpu", "memory"))


def _uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{name}"))


def _managed(manager: str, fields: dict[str, Any]) -> dict[str, Any]:
    return managed_entry(manager, "Update", "v1", fields)
