"""Policy benchmark: what CEL pod policies cost the scheduler per Pod at admission.

Not a test: run it by hand from the repo root and read the figures. Pure: no local stack, no
API server, no Slurm; nothing is started.

    python -m bench.policy_bench               # or: python bench/policy_bench.py
    python -m bench.policy_bench --pods 200 --repeat 7
    python -m bench.policy_bench --no-profile  # the timing table and the verdict only

Options: --pods N (synthetic Pods, default 100), --repeat N (timed passes over them, default 5;
every Pod is timed once per pass in each variant), --seed N (the Pods' random seed, default 7),
--profile / --no-profile (the cProfile section and the experiments after it; by default they
run when (c) costs more than 1 ms of CPU per Pod), --strict (exit 1 when the verdict is
MISSED). The exit status is 1 when a check fails, otherwise 0.

What is timed, per Pod, as PodScheduler._admit runs it, without its I/O (the Pod's Namespace
is given, as the scheduler's cache would give it; no Event is sent):

    (a) admit(pod, kill_wait_seconds=30)        the built-in admission code
    (b) the policy step, the shipped policies     reads_namespace, PodPolicies.judge(pod, ns),
                                                the verdict's audits, refusal() and warnings
    (c) the policy step, shipped + 20 repo ones the same with REPO_POLICIES below

The engine remembers each policy's verdict by the values the policy reads (CompiledPolicy.memo),
so (b) and (c) are timed twice: for a new Pod (memos emptied before the call: every policy is
evaluated) and for a replica (a sibling from the same template, other name and uid, was judged
just before, as in a Job or Deployment; only policies that read what differs are evaluated).
The verdict is judged on the new Pod, the worst case. The scheduler runs the policy step and
then admit(), so what policies add to a Pod is the step itself. Once per revision the daemon
compiles the policies: the parse of the repo's policy file, effective_policies and
compile_policies are timed for (b) and (c) as well.

The Pods look as the scheduler holds them (server metadata, the defaults of kube-apiserver
1.20, status Pending; no managedFields, which the scheduler drops from what it watches): 1 to 4
containers, with and without annotations, in 5 namespaces with different labels; about half of
them break one or two rules on purpose (each rule is broken by some Pod). Before any figure is
printed, every Pod's verdicts are checked: each planted violation is found by the policy meant
to find it, a clean Pod is not denied and admit() admits it, (b)'s findings are (c)'s
restricted to the shipped policies, and no expression fails (no InternalError finding). A
mismatch stops the benchmark.

The machine is shared and noisy: all variants are timed in the same run, interleaved per Pod
(their order rotates), in a shuffled Pod order per pass, after a warm-up pass, with
gc.collect() between passes; figures are medians and p95 over all Pod x pass samples, and the
mean over Pods of each Pod's median (what sets throughput). `cpu` is the thread's CPU time,
less disturbed by other processes than wall time; the throughput estimates use it. The
profile and the experiments (where the time of (c) goes, and what would make it cheaper,
measured without changing reconciler/) follow the verdict.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import json
import logging
import os
import platform
import pstats
import random
import statistics
import sys
import time
import typing
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

if __package__ in (None, ""):  # `python bench/policy_bench.py`: make `bench` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import celpy
from celpy.celparser import CELParser
from celpy.evaluation import Evaluator

from reconciler import wellknown as wk
from reconciler.config.files import read_shipped_policies
from reconciler.policy import engine
from reconciler.policy.document import parse_policy_file
from reconciler.policy.engine import CompiledPolicy, compile_policies, effective_policies
from reconciler.policy.loader import shipped_documents
from reconciler.policy.subjects import default_params
from reconciler.scheduler.admission import PodRequest, admit
from reconciler.scheduler.pod_policies import PodPolicies, Verdict

# ---- the scheduler benchmark's figures (README, "Scheduler benchmark", f453755) ------------
RAW_SUBMITS_PER_S = 399.6  # raw slurmrestd submits/s, 500 jobs, 16 submitters
TARGET_SHARE = 0.8  # the scheduler issue's target: 80% of the raw submit rate
END_TO_END_PODS_PER_S = 37.4  # the backlog phase's Pods bound/s
SCHEDULER_CPU_PER_POD = 0.006  # the scheduler process's own CPU per Pod (s), without policies
MACHINE_CPUS = 2  # the dev machine those figures come from

KILL_WAIT = 30
SCHEDULER_NAME = "slurm-scheduler"
SERVER_TIME = "2024-05-01T12:00:00Z"
PROFILE_THRESHOLD = 0.001  # s of CPU per Pod for (c) above which the profile runs
TITLES = {
    "a": "(a) admit() only",
    "b": "(b) shipped, new Pod",
    "c": "(c) shipped + 20 repo, new Pod",
    "b2": "(b) shipped, a replica",
    "c2": "(c) shipped + 20 repo, a replica",
}

# ---- 20 policies a site might keep in its config repo ----------------------------------------
# Quantity comparisons on requests/limits, label and annotation checks with the string helpers,
# namespaceObject matchConditions, list macros over containers, messageExpressions.
REPO_POLICY_FILE = "policies/site-pods.yaml"
REPO_POLICIES = r"""
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: cpu-limit-at-most-64}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        object.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) ||
          !('cpu' in c.resources.limits) ||
          quantity(string(c.resources.limits['cpu'])).compareTo(quantity('64')) <= 0)
      message: no container may have a cpu limit above 64 (our largest nodes have 64 cores)
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: memory-limit-at-most-4x-request}
spec:
  target: pod
  validationActions: [Warn]
  validations:
    - expression: >-
        object.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) ||
          !has(c.resources.requests) || !('memory' in c.resources.limits) ||
          !('memory' in c.resources.requests) ||
          quantity(string(c.resources.limits['memory'])).asApproximateFloat() <=
            4.0 * quantity(string(c.resources.requests['memory'])).asApproximateFloat())
      messageExpression: >-
        'memory limits more than 4x the request in: ' + object.spec.containers.filter(c,
          has(c.resources) && has(c.resources.limits) && has(c.resources.requests) &&
          'memory' in c.resources.limits && 'memory' in c.resources.requests &&
          quantity(string(c.resources.limits['memory'])).asApproximateFloat() >
            4.0 * quantity(string(c.resources.requests['memory'])).asApproximateFloat()
        ).map(c, c.name).join(', ') + ' (Slurm reserves the request only)'
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: gpus-whole-and-at-most-8}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        object.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) ||
          !('nvidia.com/gpu' in c.resources.limits) ||
          (quantity(string(c.resources.limits['nvidia.com/gpu'])).isInteger() &&
           quantity(string(c.resources.limits['nvidia.com/gpu'])).asInteger() <= 8))
      message: a container may ask for 1 to 8 whole GPUs (one node)
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: pod-cpu-at-most-128}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        object.spec.containers.map(c,
          has(c.resources) && has(c.resources.requests) && 'cpu' in c.resources.requests
            ? quantity(string(c.resources.requests['cpu'])).asApproximateFloat() : 0.0
        ).sum() <= 128.0
      messageExpression: >-
        'the Pod requests ' + string(object.spec.containers.map(c,
          has(c.resources) && has(c.resources.requests) && 'cpu' in c.resources.requests
            ? quantity(string(c.resources.requests['cpu'])).asApproximateFloat() : 0.0
        ).sum()) + ' CPUs in all; a node has 128'
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: team-label}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        has(object.metadata.labels) && 'team' in object.metadata.labels &&
        object.metadata.labels['team'].matches('^[a-z][a-z0-9-]{1,30}$')
      messageExpression: >-
        'Pod ' + object.metadata.name + ' needs a lower-case team label (e.g. team: ml); its
        labels: ' + (has(object.metadata.labels) ? object.metadata.labels.map(k, k).join(', ')
        : 'none')
      reason: Forbidden
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: team-label-matches-namespace}
spec:
  target: pod
  validationActions: [Warn]
  matchConditions:
    - name: namespace-has-a-team
      expression: >-
        has(namespaceObject.metadata) && has(namespaceObject.metadata.labels) &&
        'team' in namespaceObject.metadata.labels
  validations:
    - expression: >-
        has(object.metadata.labels) && 'team' in object.metadata.labels &&
        object.metadata.labels['team'] == namespaceObject.metadata.labels['team']
      messageExpression: >-
        'label team should be ' + namespaceObject.metadata.labels['team'] +
        ', the team of namespace ' + namespaceObject.metadata.name
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: account-of-the-cost-center}
spec:
  target: pod
  validationActions: [Deny]
  matchConditions:
    - name: namespace-has-a-cost-center
      expression: >-
        has(namespaceObject.metadata) && has(namespaceObject.metadata.labels) &&
        'cost-center' in namespaceObject.metadata.labels
  validations:
    - expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/account' in object.metadata.annotations &&
        object.metadata.annotations['sunk.coreweave.com/account'].trim().lowerAscii().startsWith(
          namespaceObject.metadata.labels['cost-center'])
      messageExpression: >-
        'namespace ' + namespaceObject.metadata.name + ' bills cost center ' +
        namespaceObject.metadata.labels['cost-center'] +
        ': set sunk.coreweave.com/account to one of its accounts (' +
        namespaceObject.metadata.labels['cost-center'] + '-...)'
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: inference-no-root-user}
spec:
  target: pod
  validationActions: [Deny]
  matchConditions:
    - name: inference-namespace
      expression: >-
        has(namespaceObject.metadata) && has(namespaceObject.metadata.labels) &&
        'workload' in namespaceObject.metadata.labels &&
        namespaceObject.metadata.labels['workload'] == 'inference'
  validations:
    - expression: >-
        !has(object.metadata.annotations) ||
        !('sunk.coreweave.com/user-id' in object.metadata.annotations) ||
        object.metadata.annotations['sunk.coreweave.com/user-id'].trim() != '0'
      message: >-
        Pods in inference namespaces may not run as user-id 0 (root): set
        sunk.coreweave.com/user-id to the team's uid
      reason: Forbidden
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: prod-pods-set-a-timeout}
spec:
  target: pod
  validationActions: [Deny]
  matchConditions:
    - name: prod-namespace
      expression: >-
        has(namespaceObject.metadata) && has(namespaceObject.metadata.labels) &&
        'tier' in namespaceObject.metadata.labels &&
        namespaceObject.metadata.labels['tier'] == 'prod'
  validations:
    - expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/timeout' in object.metadata.annotations
      message: Pods in prod namespaces set sunk.coreweave.com/timeout (minutes)
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: dev-pods-short-timeout}
spec:
  target: pod
  failurePolicy: Ignore
  validationActions: [Warn]
  matchConditions:
    - name: dev-namespace
      expression: >-
        has(namespaceObject.metadata) && has(namespaceObject.metadata.labels) &&
        'tier' in namespaceObject.metadata.labels &&
        namespaceObject.metadata.labels['tier'] == 'dev'
    - name: has-a-timeout
      expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/timeout' in object.metadata.annotations &&
        object.metadata.annotations['sunk.coreweave.com/timeout'].trim().matches('^[0-9]+$')
  validations:
    - expression: >-
        int(object.metadata.annotations['sunk.coreweave.com/timeout'].trim()) <= 240
      messageExpression: >-
        'dev Pods run at most 240 minutes, this one asks for ' +
        object.metadata.annotations['sunk.coreweave.com/timeout'].trim()
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: partition-exists}
spec:
  target: pod
  validationActions: [Deny]
  matchConditions:
    - name: has-a-partition
      expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/partition' in object.metadata.annotations
  validations:
    - expression: >-
        ['cpu', 'gpu', 'debug', 'preempt'].exists(p,
          p == object.metadata.annotations['sunk.coreweave.com/partition'].trim().lowerAscii())
      messageExpression: >-
        'no partition ' + object.metadata.annotations['sunk.coreweave.com/partition'] +
        ': use one of cpu, gpu, debug, preempt'
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: gpu-pods-in-the-gpu-partition}
spec:
  target: pod
  validationActions: [Warn]
  matchConditions:
    - name: asks-for-gpus
      expression: >-
        object.spec.containers.exists(c, has(c.resources) && has(c.resources.limits) &&
          'nvidia.com/gpu' in c.resources.limits)
  validations:
    - expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/partition' in object.metadata.annotations &&
        object.metadata.annotations['sunk.coreweave.com/partition'] == 'gpu'
      message: Pods with GPUs go to the gpu partition (sunk.coreweave.com/partition gpu)
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: images-from-approved-registries}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        object.spec.containers.all(c,
          ['registry.example.com/', 'ghcr.io/coreweave/'].exists(r, c.image.startsWith(r)))
      messageExpression: >-
        'images from registries we do not mirror: ' + object.spec.containers.filter(c,
          !['registry.example.com/', 'ghcr.io/coreweave/'].exists(r, c.image.startsWith(r))
        ).map(c, c.name + '=' + c.image).join(', ')
      reason: Forbidden
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: images-pinned}
spec:
  target: pod
  validationActions: [Warn]
  validations:
    - expression: >-
        object.spec.containers.all(c,
          c.image.substring(c.image.lastIndexOf('/') + 1).contains(':') &&
          !c.image.endsWith(':latest'))
      messageExpression: >-
        'pin a tag instead of latest or none: ' + object.spec.containers.filter(c,
          !c.image.substring(c.image.lastIndexOf('/') + 1).contains(':') ||
          c.image.endsWith(':latest')).map(c, c.image).join(', ')
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: no-privileged-containers}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: >-
        object.spec.containers.all(c, !has(c.securityContext) ||
          !has(c.securityContext.privileged) || !c.securityContext.privileged)
      message: privileged containers can take a Slurm node down; ask the platform team
      reason: Forbidden
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: no-host-network}
spec:
  target: pod
  validationActions: [Deny]
  validations:
    - expression: "!has(object.spec.hostNetwork) || !object.spec.hostNetwork"
      message: hostNetwork shares the Slurm node's network with every job on it
      reason: Forbidden
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: env-names-upper-case}
spec:
  target: pod
  failurePolicy: Ignore
  validationActions: [Audit]
  validations:
    - expression: >-
        object.spec.containers.all(c, !has(c.env) ||
          c.env.all(e, e.name == e.name.upperAscii()))
      message: environment variable names are upper case here
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: comment-at-most-120}
spec:
  target: pod
  validationActions: [Warn]
  matchConditions:
    - name: has-a-comment
      expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/comment' in object.metadata.annotations
  validations:
    - expression: size(object.metadata.annotations['sunk.coreweave.com/comment']) <= 120
      messageExpression: >-
        'sunk.coreweave.com/comment has ' +
        string(size(object.metadata.annotations['sunk.coreweave.com/comment'])) +
        ' characters; squeue shows 120'
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: excluded-nodes-exist}
spec:
  target: pod
  validationActions: [Deny]
  matchConditions:
    - name: excludes-nodes
      expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/excluded-nodes' in object.metadata.annotations
  validations:
    - expression: >-
        object.metadata.annotations['sunk.coreweave.com/excluded-nodes'].split(',').all(n,
          n.trim().startsWith('gpu-') || n.trim().startsWith('cpu-'))
      messageExpression: >-
        'no such Slurm nodes: ' +
        object.metadata.annotations['sunk.coreweave.com/excluded-nodes'].split(',').filter(n,
          !n.trim().startsWith('gpu-') && !n.trim().startsWith('cpu-')).join(', ') +
        ' (ours are gpu-* and cpu-*)'
---
apiVersion: policy.reconciler.sunk.dev/v1alpha1
kind: Policy
metadata: {name: priority-at-most-1000}
spec:
  target: pod
  validationActions: [Deny]
  matchConditions:
    - name: has-a-priority
      expression: >-
        has(object.metadata.annotations) &&
        'sunk.coreweave.com/priority' in object.metadata.annotations &&
        object.metadata.annotations['sunk.coreweave.com/priority'].trim().matches('^[0-9]+$')
  validations:
    - expression: >-
        int(object.metadata.annotations['sunk.coreweave.com/priority'].trim()) <= 1000
      messageExpression: >-
        'sunk.coreweave.com/priority ' +
        object.metadata.annotations['sunk.coreweave.com/priority'].trim() +
        ' is above 1000, which only the platform team uses'
"""

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
    "root-inference": "inference-no-root-user",
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
    "priority": "priority-at-most-1000",
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
        del containers[0]["resources"]["requests"]["memory"]
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
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = container["image"]
        pinned = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
        container.setdefault("imagePullPolicy", "IfNotPresent" if pinned else "Always")
        container["volumeMounts"] = [
            {
                "name": token,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ]
        for env in container.get("env", ()):
            ref = (env.get("valueFrom") or {}).get("fieldRef")
            if ref is not None:
                ref.setdefault("apiVersion", "v1")
        for port in container.get("ports", ()):
            port.setdefault("protocol", "TCP")
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
    return {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": SERVER_TIME,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


# ---- policies ---------------------------------------------------------------------------------


def params() -> dict[str, Any]:
    """What the scheduler passes as `params` (params_of: killWait, schedulerName, ...)."""
    hosts = [f"slurm-node-{i:02d}" for i in range(16)]
    return {
        **default_params(),
        "killWait": KILL_WAIT,
        "schedulerName": SCHEDULER_NAME,
        "slurmNodeHosts": hosts,
    }


def compile_revision(with_repo: bool) -> tuple[tuple[CompiledPolicy, ...], float, float]:
    """What the daemon does once per revision for the pod policies: parse the shipped files
    and the repo's policy file, effective_policies, compile_policies. -> (policies, parse s,
    compile s)."""
    t0 = time.perf_counter()
    shipped = shipped_documents(read_shipped_policies())
    repo = parse_policy_file(REPO_POLICIES, REPO_POLICY_FILE, "repo") if with_repo else []
    t1 = time.perf_counter()
    compiled = compile_policies(effective_policies(shipped, repo))
    t2 = time.perf_counter()
    pods = tuple(p for p in compiled if p.policy.target == "pod")
    return pods, t1 - t0, t2 - t1


def policy_step(policies: PodPolicies, pod: Mapping[str, Any], namespace: Any) -> Verdict:
    """What PodScheduler._passes_policies computes for a Pod, without its I/O: the Namespace
    is given (the scheduler reads it through a cache), no Event is sent, nothing is logged."""
    ns = namespace if policies.reads_namespace else None
    verdict = policies.judge(pod, ns)
    _ = verdict.audits, verdict.refusal(), verdict.warnings
    return verdict


def memos(policies: PodPolicies) -> list[dict[Any, Any]]:
    """The engine's verdict memos (CompiledPolicy.memo: a policy that saw the same values at
    the paths it reads answers from it); none if this engine has no memo."""
    found = (getattr(p, "memo", None) for p in policies.policies)
    return [m for m in found if isinstance(m, dict)]


def forget(policies: PodPolicies) -> None:
    for memo in memos(policies):
        memo.clear()


def replica_misses(samples: Sequence[Sample], policies: PodPolicies) -> str:
    """Which policies are evaluated anew for a replica of a Pod judged just before."""
    missed: Counter[str] = Counter()
    for s in samples:
        forget(policies)
        policy_step(policies, s.pod, s.namespace)
        before = [len(getattr(p, "memo", ())) for p in policies.policies]
        policy_step(policies, s.sibling, s.namespace)
        for p, size in zip(policies.policies, before, strict=True):
            if len(getattr(p, "memo", ())) > size:
                missed[p.policy.name] += 1
    forget(policies)
    names = ", ".join(f"{name} ({n} of {len(samples)} Pods)" for name, n in missed.most_common())
    return f"{sum(missed.values()) / len(samples):.1f} of {len(policies.policies)}" + (
        f": {names}" if names else ""
    )


# ---- checks -------------------------------------------------------------------------------------


def check(samples: Sequence[Sample], shipped: PodPolicies, full: PodPolicies) -> dict[str, int]:
    """Refuse to report figures for verdicts that are not what the Pods were built to get."""
    problems: list[str] = []
    shipped_names = {p.policy.name for p in shipped.policies}
    fired: Counter[str] = Counter()
    stats: Counter[str] = Counter()
    for s in samples:
        name = s.pod["metadata"]["name"]
        a = admit(s.pod, kill_wait_seconds=KILL_WAIT)
        b, c = policy_step(shipped, s.pod, s.namespace), policy_step(full, s.pod, s.namespace)
        found = {f.policy for f in c.findings}
        fired.update(found)
        for f in c.findings:
            if f.reason == "InternalError":
                problems.append(f"{name}: {f.policy} failed: {f.message}")
        for planted in s.violations:
            if VIOLATIONS[planted] not in found:
                problems.append(f"{name}: planted {planted}, {VIOLATIONS[planted]} did not find it")
        refused = bool(REFUSED_BY_ADMIT & set(s.violations))
        if refused == isinstance(a, PodRequest):
            problems.append(
                f"{name}: admit() gave {type(a).__name__} for {s.violations or 'a clean Pod'}"
            )
        if not s.violations and c.denials:
            problems.append(f"{name}: a clean Pod denied: {c.refusal()}")
        if b.findings != tuple(f for f in c.findings if f.policy in shipped_names):
            problems.append(f"{name}: (b) and (c) disagree on the shipped policies")
        stats["denied"] += bool(c.denials)
        stats["warned"] += bool(c.warnings)
        stats["audited"] += bool(c.audits)
        stats["refused by admit"] += refused
        stats["with annotations"] += "annotations" in s.pod["metadata"]
        stats["planted"] += bool(s.violations)
    never = sorted({p.policy.name for p in full.policies} - set(fired) - NEVER_FIRES_HERE)
    if never and len(samples) >= len(VIOLATIONS):
        problems.append(f"never fired: {', '.join(never)}")
    if problems:
        raise SystemExit(
            "benchmark check failed: "
            + "; ".join(problems[:10])
            + (f" (+{len(problems) - 10} more)" if len(problems) > 10 else "")
        )
    return dict(stats)


# ---- timing -----------------------------------------------------------------------------------


@dataclass
class Times:
    wall: dict[str, list[list[float]]] = field(default_factory=dict)  # variant -> pod -> runs
    cpu: dict[str, list[list[float]]] = field(default_factory=dict)


Call = tuple[Callable[[Sample], Any] | None, Callable[[Sample], Any]]  # (untimed prepare, timed)


def time_variants(
    samples: Sequence[Sample], calls: Mapping[str, Call], repeat: int, seed: int
) -> Times:
    times = Times(
        wall={k: [[] for _ in samples] for k in calls},
        cpu={k: [[] for _ in samples] for k in calls},
    )
    keys = list(calls)
    for s in samples:  # warm-up
        for k in keys:
            prepare, call = calls[k]
            if prepare is not None:
                prepare(s)
            call(s)
    rng = random.Random(seed + 1)
    order = list(range(len(samples)))
    for round_ in range(repeat):
        rng.shuffle(order)
        gc.collect()  # garbage of the previous pass is not charged to this one
        for n, i in enumerate(order):
            shift = (round_ + n) % len(keys)
            for k in keys[shift:] + keys[:shift]:
                prepare, call = calls[k]
                if prepare is not None:
                    prepare(samples[i])
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                call(samples[i])
                c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
                times.wall[k][i].append((w1 - w0) / 1e9)
                times.cpu[k][i].append((c1 - c0) / 1e9)
    return times


@dataclass
class Stats:
    median: float
    p95: float
    mean: float  # mean over Pods of each Pod's median


def stats(per_pod: list[list[float]]) -> Stats:
    flat = sorted(x for runs in per_pod for x in runs)
    p95 = flat[min(len(flat) - 1, round(0.95 * (len(flat) - 1)))]
    mean = statistics.fmean(statistics.median(runs) for runs in per_pod)
    return Stats(statistics.median(flat), p95, mean)


def time_compiles(repeat: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {k: {"parse": [], "compile": []} for k in "bc"}
    for round_ in range(repeat):
        for k in "bc" if round_ % 2 == 0 else "cb":
            gc.collect()
            _, parse, comp = compile_revision(with_repo=k == "c")
            out[k]["parse"].append(parse)
            out[k]["compile"].append(comp)
    return out


# ---- report -------------------------------------------------------------------------------------


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.0f}"


def report_times(times: Times, samples: Sequence[Sample]) -> dict[str, Stats]:
    cpu = {k: stats(times.cpu[k]) for k in times.cpu}
    wall = {k: stats(times.wall[k]) for k in times.wall}
    head = (
        f"{'per Pod, microseconds':34} | {'cpu med':>9} {'cpu p95':>9} {'cpu mean':>9} | "
        f"{'wall med':>9} {'wall p95':>9} | {'x (a) med':>9} {'x (a) mean':>10}"
    )
    print(head)
    print("-" * len(head))
    for k in times.cpu:
        c, w = cpu[k], wall[k]
        print(
            f"{TITLES[k]:34} | {us(c.median)} {us(c.p95)} {us(c.mean)} | {us(w.median)} "
            f"{us(w.p95)} | {c.median / cpu['a'].median:9.0f} {c.mean / cpu['a'].mean:10.0f}"
        )
    by_size: dict[int, list[float]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_size[s.containers].append(statistics.median(times.cpu["c"][i]))
    print(
        "  (c) by containers per Pod, cpu median of Pod medians: "
        + ", ".join(
            f"{n}: {statistics.median(v) * 1e3:.1f} ms ({len(v)} Pods)"
            for n, v in sorted(by_size.items())
        )
    )
    return cpu


def report_throughput(cpu: Mapping[str, Stats], strict: bool) -> bool:
    added_c = cpu["c"].mean
    submit = 1 / RAW_SUBMITS_PER_S
    target = TARGET_SHARE * RAW_SUBMITS_PER_S
    print()
    print("What it means for throughput (added = the policy step's CPU per Pod, mean of Pod")
    print("medians; it holds the GIL, so the scheduler's 16 workers do not run it in parallel):")
    rows = []
    for key in ("b", "c", "b2", "c2"):
        label, added = TITLES[key], cpu[key].mean
        rows.append(
            (
                label,
                added * 1e3,
                added / submit,
                1 / added,
                1 / added / RAW_SUBMITS_PER_S,
                1 / (SCHEDULER_CPU_PER_POD + added),
                1 / (1 / END_TO_END_PODS_PER_S + added),
                1 / (1 / END_TO_END_PODS_PER_S + added / MACHINE_CPUS),
            )
        )
    head = (
        f"{'':34} | {'added ms':>8} {'x submit':>8} | {'bound/s':>8} {'x raw':>6} | "
        f"{'+6ms/s':>7} | {'e2e serial':>10} {'e2e 2-CPU':>9}"
    )
    print(head)
    print("-" * len(head))
    for label, ms, x_submit, bound, x_raw, sched, serial, spread in rows:
        print(
            f"{label:34} | {ms:8.2f} {x_submit:8.2f} | {bound:8.1f} {x_raw:6.2f} | {sched:7.1f} | "
            f"{serial:10.1f} {spread:9.1f}"
        )
    print(
        f"  x submit: against the CPU budget of one raw slurmrestd submit at {RAW_SUBMITS_PER_S}/s"
        f" ({submit * 1e3:.2f} ms)"
    )
    print(
        "  bound/s: Pods/s if the policy step were the scheduler's only cost; x raw: that over "
        f"{RAW_SUBMITS_PER_S}/s (target {TARGET_SHARE})"
    )
    print(
        f"  +6ms/s: Pods/s the scheduler process's CPU allows with its own ~"
        f"{SCHEDULER_CPU_PER_POD * 1e3:.0f} ms per Pod plus the policy step"
    )
    print(
        f"  e2e serial: the measured {END_TO_END_PODS_PER_S} Pods bound/s with the step added to"
        " every Pod's path, 1/(1/37.4 + added);"
    )
    print(
        f"  e2e 2-CPU: the same if the saturated {MACHINE_CPUS} CPUs absorb it, "
        "1/(1/37.4 + added/2)"
    )
    bound = 1 / added_c
    met = bound >= target
    drop = 1 - rows[1][6] / END_TO_END_PODS_PER_S
    print()
    print(
        f"verdict: {'MET' if met else 'MISSED'}: shipped + 20 repo policies cost "
        f"{added_c * 1e3:.2f} ms of CPU per new Pod ({added_c / submit:.1f} x a raw submit), so "
        f"admission alone caps the scheduler at {bound:.0f} Pods/s = "
        f"{bound / RAW_SUBMITS_PER_S:.2f} x raw ({'above' if met else 'below'} the "
        f"{TARGET_SHARE} x {RAW_SUBMITS_PER_S} = "
        f"{target:.0f}/s target); end-to-end {END_TO_END_PODS_PER_S} -> "
        f"{rows[1][6]:.1f} Pods/s (-{drop:.0%}); a replica of a Pod already judged: "
        f"{cpu['c2'].mean * 1e3:.2f} ms"
    )
    return met or not strict


# ---- profile and experiments ------------------------------------------------------------------

AREAS = (  # (label, substrings of a profiled function's file), first match wins
    ("celpy interpreter (lark tree walk)", ("celpy/evaluation.py", "lark/")),
    ("typing at run time (own time)", ("typing.py",)),
    ("celpy types", ("celpy/celtypes.py",)),
    ("json_to_cel (the activation)", ("celpy/adapter.py",)),
    (
        "Kubernetes CEL library + quantity",
        (
            "reconciler/policy/k8s_library.py",
            "reconciler/compile/quantity.py",
            "fractions.py",
            "decimal",
        ),
    ),
    ("logging (disabled debug calls)", ("logging/",)),
    ("engine + PodPolicies", ("reconciler/policy/engine.py", "reconciler/scheduler/")),
    ("regular expressions", ("re2", "re/", "sre_", "re.py")),
)
CUMULATIVE = (  # (basename:function, what it is)
    ("__init__.py:evaluate", "Runner.evaluate: all program runs"),
    ("typing.py:inner", "typing subscripts at run time (Tuple[Result, Result] ...)"),
    ("__init__.py:new_activation", "a new Activation per program run"),
    ("evaluation.py:set_activation", "its clone + load_values per program run"),
    ("adapter.py:json_to_cel", "json_to_cel (once per Pod)"),
    ("k8s_library.py:call", "Kubernetes CEL library calls"),
)


def profile(samples: Sequence[Sample], full: PodPolicies) -> None:
    print()
    print("PROFILE of (c), new Pods: cProfile over one pass of the Pods (it slows Python code")
    print("down, so read the shares, not the times)")
    prof = cProfile.Profile()
    prof.enable()
    for s in samples:
        forget(full)  # a new Pod: every policy evaluated
        policy_step(full, s.pod, s.namespace)
    prof.disable()
    forget(full)
    raw: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    areas: Counter[str] = Counter()
    for (filename, _, funcname), entry in raw.items():
        where = filename if filename != "~" else funcname
        label = next(
            (lb for lb, keys in AREAS if any(k in where for k in keys)),
            "built-ins (hash, getattr, isinstance ...)" if filename == "~" else "other",
        )
        areas[label] += entry[2]
    print("  own time by area:")
    for label, seconds in areas.most_common():
        print(f"    {label:44} {seconds / total:6.1%}")
    cumulative: Counter[str] = Counter()
    for (fn, _, name), entry in raw.items():
        cumulative[f"{os.path.basename(fn)}:{name}"] += entry[3]
    print("  cumulative (with what they call):")
    for key, why in CUMULATIVE:
        if key in cumulative:
            print(f"    {why:60} {cumulative[key] / total:6.1%}")
    print("  top functions by own time:")
    for (fn, line, name), entry in sorted(raw.items(), key=lambda kv: -kv[1][2])[:8]:
        short = "/".join(fn.split("/")[-2:]) + f":{line}" if fn != "~" else ""
        print(f"    {entry[2] / total:6.1%} {entry[1]:>9} calls  {short}({name})")


def experiments(samples: Sequence[Sample], full: PodPolicies) -> None:
    """Where a faster engine could come from, measured here without changing reconciler/."""
    n = len(samples)
    print()
    print("EXPERIMENTS: CPU per Pod, best of 3 passes over all Pods each (so compare them with the")
    print("reference line, timed the same way, rather than with the table above)")

    def step(i: int) -> None:  # a new Pod: memos emptied (well under 1% of the time)
        forget(full)
        policy_step(full, samples[i].pod, samples[i].namespace)

    reference = _best_per_pod(step, n)
    print(f"  reference: the policy step of (c): {reference * 1e3:.2f} ms per Pod")

    runs: Counter[str] = Counter()
    real_run = engine._run

    def counting(program: Any, activation: dict[str, Any]) -> Any:
        runs["programs"] += 1
        return real_run(program, activation)

    with mock.patch.object(engine, "_run", counting):
        for s in samples:
            forget(full)
            full.judge(s.pod, s.namespace)
    per_pod = runs["programs"] / n
    print(
        f"  CEL programs run per Pod (matchConditions, validations, messages): {per_pod:.1f}, "
        f"{reference / per_pod * 1e6:.0f} us each on average"
    )

    reads = _best_per_pod(lambda i: full.reads_namespace, n)
    print(f"  PodPolicies.reads_namespace (recomputed per Pod): {reads * 1e6:.0f} us")

    base = params()

    def activation(s: Sample) -> dict[str, Any]:
        return {
            "object": celpy.json_to_cel(s.pod),
            "params": celpy.json_to_cel(dict(base)),
            "namespaceObject": celpy.json_to_cel(dict(s.namespace)),
        }

    convert = _best_per_pod(lambda i: activation(samples[i]), n)
    print(
        f"  json_to_cel of Pod + params + Namespace: {convert * 1e6:.0f} us "
        f"({convert / reference:.1%}); evaluate() converts once per Pod (at its first memo "
        "miss), not per policy"
    )
    keyed = [p for p in full.policies if hasattr(p, "inputs")]
    if keyed:
        from reconciler.policy.inputs import inputs_key

        base_roots = dict(base)

        def keys(i: int) -> None:
            roots = {
                "object": samples[i].pod,
                "params": base_roots,
                "namespaceObject": samples[i].namespace,
            }
            for p in keyed:
                inputs_key(p.inputs, roots)

        memo_keys = _best_per_pod(keys, n)
        print(
            f"  the memo's keys (inputs_key, JSON of what each policy reads) for all "
            f"{len(keyed)} policies: {memo_keys * 1e6:.0f} us per Pod, paid by every Pod"
        )

    env = celpy.Environment()
    trivial = env.program(env.compile("true"))
    acts = [activation(s) for s in samples]
    fixed = _best_per_pod(lambda i: trivial.evaluate(acts[i]), n)
    prepared = []
    for act in acts:
        one = trivial.new_activation().clone()
        one.identifiers.load_values(act)
        prepared.append(one)
    reuse = _best_per_pod(lambda i: Evaluator(trivial.ast, prepared[i]).evaluate(), n)
    print(
        f"  fixed cost of a program run (`true` through Runner.evaluate: new Activation, clone, "
        f"load_values): {fixed * 1e6:.0f} us x {per_pod:.1f} = {fixed * per_pod * 1e3:.2f} ms "
        f"({fixed * per_pod / reference:.1%})"
    )
    print(
        f"    on one Activation built per Pod (Evaluator(ast, act).evaluate()): {reuse * 1e6:.0f} "
        f"us a run: would save {(fixed - reuse) * per_pod * 1e3:.2f} ms "
        f"({(fixed - reuse) * per_pod / reference:.1%})"
    )

    plain, hashed = float("inf"), float("inf")
    for _ in range(3):  # interleaved: the two are compared with each other
        plain = min(plain, _best_per_pod(step, n, passes=1))
        hashed = min(hashed, _with_cached_union_hash(lambda: _best_per_pod(step, n, passes=1)))
    print(
        "  typing.Union hashes memoized (celpy subscripts Tuple[Result, Result] & co. in its hot "
        "paths; each subscript hashes the Result Union anew, through a frozenset of its members): "
        f"{hashed * 1e3:.2f} ms against {plain * 1e3:.2f} ({hashed / plain - 1:+.0%})"
    )

    per_policy = []
    for compiled in full.policies:
        alone = PodPolicies((compiled,), full.params)

        def judge_alone(i: int, alone: PodPolicies = alone) -> None:
            forget(alone)
            alone.judge(samples[i].pod, samples[i].namespace)

        t = _best_per_pod(judge_alone, n)
        per_policy.append((max(t - convert, 0.0), compiled.policy.name, compiled.policy.origin))
    per_policy.sort(reverse=True)
    forget(full)
    together = sum(t for t, _, _ in per_policy)
    print("  per policy (judge with that policy alone, minus json_to_cel):")
    for t, name, origin in per_policy[:8]:
        print(f"    {t * 1e3:6.2f} ms  {name} ({origin})")
    rest = per_policy[8:]
    print(
        f"    {sum(t for t, _, _ in rest) * 1e3:6.2f} ms  the other {len(rest)}; all "
        f"{len(per_policy)} + one json_to_cel: {(together + convert) * 1e3:.2f} ms "
        f"(reference {reference * 1e3:.2f})"
    )
    transpiled_experiment(samples, full, reference)


def _with_cached_union_hash(measure: Callable[[], float]) -> float:
    """Run `measure` with typing's Union.__hash__ memoized per object (restored after)."""
    union = typing._UnionGenericAlias  # type: ignore[attr-defined]
    original = union.__hash__
    memo: dict[int, tuple[Any, int]] = {}

    def cached(self: Any) -> int:
        found = memo.get(id(self))
        if found is None:
            found = memo[id(self)] = (self, original(self))
        return found[1]

    union.__hash__ = cached
    try:
        return measure()
    finally:
        union.__hash__ = original


def transpiled_experiment(samples: Sequence[Sample], full: PodPolicies, reference: float) -> None:
    """celpy 0.5's other runner, CompiledRunner (CEL transpiled to Python): faster, but right?
    Compiled with the engine's own compile_policies under a patched Environment; celpy's parser
    is a singleton made for one tree class, so it is rebuilt for the transpiler and after it."""
    celpy_log = logging.getLogger("celpy")
    level = celpy_log.level
    celpy_log.setLevel(logging.CRITICAL)  # it logs every failed exec() as an "Internal error"
    try:
        CELParser.CEL_PARSER = None
        environment = functools.partial(celpy.Environment, runner_class=celpy.CompiledRunner)
        with mock.patch.object(engine.celpy, "Environment", environment):
            try:
                compiled = compile_policies(p.policy for p in full.policies)
            except Exception as error:  # report it, do not stop the benchmark
                print(f"  celpy CompiledRunner: does not compile these policies ({error})")
                return
        fast = PodPolicies(compiled, full.params)
        differ = failed = 0
        for s in samples:
            got = fast.judge(s.pod, s.namespace).findings
            differ += got != full.judge(s.pod, s.namespace).findings
            failed += sum(f.reason == "InternalError" for f in got)
        n = len(samples)

        def judge_fast(i: int) -> None:
            forget(fast)
            fast.judge(samples[i].pod, samples[i].namespace)

        t = _best_per_pod(judge_fast, n)
        print(
            f"  celpy's CompiledRunner (CEL transpiled to Python): {t * 1e3:.2f} ms "
            f"({t / reference - 1:+.0%}), but its findings differ on {differ} of {n} Pods: "
            f"{failed / n:.1f} of the {len(fast.policies)} policies fail per Pod (its generated "
            "code errors on has(), `cond ? a : b` and more), so that time is mostly of failing "
            "code; it also runs through module globals (not thread-safe): not a way out"
        )
    finally:
        CELParser.CEL_PARSER = None
        celpy_log.setLevel(level)


def _best_per_pod(call: Callable[[int], Any], count: int, passes: int = 3) -> float:
    best = float("inf")
    for _ in range(passes):
        gc.collect()
        c0 = time.thread_time_ns()
        for i in range(count):
            call(i)
        best = min(best, (time.thread_time_ns() - c0) / 1e9 / count)
    return best


# ---- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.policy_bench",
        description="CPU per Pod of the scheduler's admission with CEL pod policies.",
    )
    parser.add_argument("--pods", type=int, default=100, help="synthetic Pods (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes (default 5)")
    parser.add_argument("--seed", type=int, default=7, help="the Pods' random seed")
    parser.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="cProfile (c) and run the experiments (default: when (c) costs over 1 ms per Pod)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 if the verdict is MISSED")
    args = parser.parse_args(argv)
    if args.pods < 1 or args.repeat < 1:
        parser.error("--pods and --repeat must be at least 1")
    started = time.perf_counter()
    print("reconciler policy benchmark (admission cost per Pod)")
    print(
        f"  python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )

    t0 = time.perf_counter()
    compile_revision(with_repo=True)  # the first one in a process also builds celpy's parser
    cold = time.perf_counter() - t0
    compiled_b, _, _ = compile_revision(with_repo=False)
    compiled_c, _, _ = compile_revision(with_repo=True)
    shipped = PodPolicies(compiled_b, params())
    full = PodPolicies(compiled_c, params())
    samples = make_samples(args.pods, args.seed)
    counts = check(samples, shipped, full)
    n_programs = sum(
        len(p.conditions) + sum(1 + (v.message is not None) for v in p.validations)
        for p in full.policies
    )
    sizes = [len(json.dumps(s.pod)) for s in samples]
    print(
        f"  policies: (b) {len(shipped.policies)} shipped; (c) {len(full.policies)} "
        f"({n_programs} CEL programs); reads namespaceObject: {full.reads_namespace}"
    )
    print(
        f"  Pods: {len(samples)}, {statistics.mean(s.containers for s in samples):.1f} containers"
        f" and {statistics.mean(sizes) / 1024:.1f} KiB of JSON on average; "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    if memos(full):
        print(
            "  the engine remembers verdicts by the values each policy reads: a new Pod is judged "
            "with the memos emptied; a replica"
        )
        print("  right after a sibling (same template, other name/uid) was judged")
        print(f"  policies evaluated anew for a replica: (b) {replica_misses(samples, shipped)}")
        print(f"    (c) {replica_misses(samples, full)}")
    else:
        print("  the engine has no verdict memo: a replica costs what a new Pod does")
    print(
        f"  times: {args.repeat} passes, all variants interleaved per Pod; median and p95 over "
        "all Pod x pass samples, mean = mean over Pods of each Pod's median"
    )
    print()

    def replica(policies: PodPolicies) -> Call:
        def prepare(s: Sample) -> None:  # its sibling was judged just before
            forget(policies)
            policy_step(policies, s.pod, s.namespace)

        return prepare, lambda s: policy_step(policies, s.sibling, s.namespace)

    calls: dict[str, Call] = {
        "a": (None, lambda s: admit(s.pod, kill_wait_seconds=KILL_WAIT)),
        "b": (lambda s: forget(shipped), lambda s: policy_step(shipped, s.pod, s.namespace)),
        "c": (lambda s: forget(full), lambda s: policy_step(full, s.pod, s.namespace)),
        "b2": replica(shipped),
        "c2": replica(full),
    }
    times = time_variants(samples, calls, args.repeat, args.seed)
    cpu = report_times(times, samples)
    compiles = time_compiles(args.repeat)
    print()
    print(f"once per revision, ms (median of {args.repeat}; wall): ", end="")
    print(
        "; ".join(
            f"{k}: parse {statistics.median(compiles[k]['parse']) * 1e3:.1f} + compile "
            f"{statistics.median(compiles[k]['compile']) * 1e3:.1f}"
            for k in "bc"
        )
        + f"; the first compile in a process {cold * 1e3:.0f} (builds celpy's Lark parser)"
    )

    ok = report_throughput(cpu, args.strict)
    if args.profile or (args.profile is None and cpu["c"].mean > PROFILE_THRESHOLD):
        profile(samples, full)
        experiments(samples, full)
    print()
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
