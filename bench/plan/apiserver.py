"""Secondary: what the requests of a live plan cost against a real local kube-apiserver."""

from __future__ import annotations

import json
import shutil
import statistics
import time
from typing import Any

from bench.plan.scenarios import Scenario, node_set_statefulsets
from reconciler.plan.diff import desired_kube_objects


def apiserver_estimate(scenarios: dict[str, list[Scenario]], requests: int) -> None:
    """Secondary: what the requests a live plan makes cost against a real local kube-apiserver
    1.20.2 (reconciler/local; `reconciler local setup` fetches it). Skipped when it is missing."""
    from reconciler.adapters.kube import Kube
    from reconciler.errors import LocalStackError
    from reconciler.local.kube import control_plane as kube_module
    from reconciler.local.stack import LocalStack
    from reconciler.local.stack_record import new_temp_runtime_dir

    print()
    print("SECONDARY: API request cost (real local kube-apiserver; not part of the pure figures)")
    try:
        kube_module.find_binaries()
    except LocalStackError as exc:
        print(f"  skipped: {exc.message}")
        return
    # The largest size with at most 1,000 StatefulSets (the 10,000-node workload's count).
    label, scs = max(
        ((lb, s) for lb, s in scenarios.items() if len(node_set_statefulsets(s[0].state)) <= 1000),
        key=lambda item: len(node_set_statefulsets(item[1][0].state)),
    )
    steady, _, scale = scs
    objects = list(desired_kube_objects(steady.state).values())
    runtime = new_temp_runtime_dir("plan-bench-")
    stack = LocalStack(runtime, cluster_name="plan-bench")
    client = None
    try:
        started = time.perf_counter()
        stack.up_kube()
        up = time.perf_counter() - started
        print(f"  etcd + kube-apiserver + kube-controller-manager up in {up:.1f} s")
        assert stack.kube is not None
        client = Kube.from_kubeconfig(stack.kube.paths.kubeconfig)
        namespace = steady.state.namespace
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        # Create the live objects, StatefulSets at replicas 0 (no Pods for the controllers).
        started = time.perf_counter()
        for obj in objects:
            body = json.loads(json.dumps(obj))
            if body["kind"] == "StatefulSet":
                body["spec"]["replicas"] = 0
            client.apply(body)
        created = time.perf_counter() - started
        sts_count = sum(1 for o in objects if o["kind"] == "StatefulSet")
        print(
            f"  created the {label}-node workload's {len(objects)} objects ({sts_count} "
            f"StatefulSets at replicas 0) in {created:.1f} s, sequential applies"
        )
        _compare_with_server(client, steady, namespace)
        selector = "app.kubernetes.io/managed-by=sunk-reconciler"
        lists = []
        for _ in range(3):
            t0 = time.perf_counter()
            listed = client.list("apps/v1", "StatefulSet", namespace, label_selector=selector)
            lists.append(time.perf_counter() - t0)
        assert len(listed.items) == sts_count, len(listed.items)
        print(
            f"  LIST {sts_count} StatefulSets (one paged read): best {min(lists) * 1000:.0f} ms, "
            f"median {statistics.median(lists) * 1000:.0f} ms"
        )
        # Sequential server-side-apply dry-runs of the scale-down's objects (desired replicas).
        views = list(scale.server_view)
        scaled = desired_kube_objects(scale.state)
        times = []
        for i in range(requests):
            obj = scaled[views[i % len(views)]]
            t0 = time.perf_counter()
            view = client.apply(obj, dry_run=True)
            times.append(time.perf_counter() - t0)
            assert view["metadata"]["name"] == obj["metadata"]["name"]
        per = statistics.median(times)
        print(
            f"  {requests} sequential server-side-apply dry-runs (PATCH ?dryRun=All): median "
            f"{per * 1000:.1f} ms, best {min(times) * 1000:.1f} ms, p90 "
            f"{sorted(times)[int(len(times) * 0.9)] * 1000:.1f} ms per request"
        )
        print("  estimate for the dry-runs a plan needs, sequential, at the median (pure plan time "
              "is separate):")  # fmt: skip
        for lb, s in scenarios.items():
            line = ", ".join(
                f"{sc.key} {len(sc.expected.dry_runs):,} -> {len(sc.expected.dry_runs) * per:.2f} s"
                for sc in s
            )
            print(f"    {lb:>6} nodes: {line}")
    finally:
        if client is not None:
            client.close()
        stack.down()
        shutil.rmtree(runtime, ignore_errors=True)


def _compare_with_server(client: Any, steady: Scenario, namespace: str) -> None:
    """How close the synthetic live objects are to what the server really returns."""
    sts = node_set_statefulsets(steady.state)[0]  # a node set's, not the login StatefulSet
    real = client.get("apps/v1", "StatefulSet", sts.name, namespace)
    ours = steady.live.kube_objects[sts]

    def paths(value: Any, prefix: str = "") -> set[str]:
        if isinstance(value, dict):
            return {p for k, v in value.items() for p in paths(v, f"{prefix}.{k}")} | {prefix}
        if isinstance(value, list):
            return {p for i, v in enumerate(value) for p in paths(v, f"{prefix}[{i}]")} | {prefix}
        return {prefix}

    skip = ".metadata.managedFields"
    mine = {p for p in paths(ours) if not p.startswith(skip)}
    theirs = {p for p in paths(real) if not p.startswith(skip)}
    only_real = sorted(theirs - mine)
    only_ours = sorted(mine - theirs)
    print(
        f"  synthetic vs real live StatefulSet {sts.name}: {len(json.dumps(ours))} vs "
        f"{len(json.dumps(real))} bytes JSON; field paths only in the real one: "
        f"{only_real or 'none'}; only in ours: {only_ours or 'none'} (managedFields not compared)"
    )
