"""deploy/ against the real local API server: every object passes a server-side dry run, and
`reconciler run` acting as the ServiceAccount deploy/base makes is never refused, yet uses
every rule the RBAC grants (read from the API server's audit log): enough, and no more."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.local.ports import free_port
from reconciler.local.stack import LocalStack
from tests.integration.flux_fixture import install_crd, remove_crd
from tests.integration.helpers import (
    create_pod_group,
    install_pod_group_crd,
    stop_cleanly,
    unique,
    wait_for,
)
from tests.integration.local_up import local_up
from tests.kustomize import kustomize

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
NAMESPACE, RELEASE = "slurm", "slurm"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:reconciler"
SCHEDULER = "slurm-slurm-slurm-scheduler"  # the fixture repo's, by default
OWNED = {wk.LABEL_MANAGED_BY: wk.MANAGED_BY_VALUE, wk.LABEL_RELEASE: RELEASE}


@dataclass
class Deployed:
    stack: LocalStack
    runtime: Path
    admin: Kube
    repo: Path
    objects: list[dict[str, Any]]
    sa_kubeconfig: Path


@pytest.fixture(scope="module")
def deployed(stack_timings: dict[str, float]) -> Iterator[Deployed]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-deploy-"))
    try:
        repo = work / "repo"
        shutil.copytree(FIXTURE_REPO, repo)
        with local_up(
            repo, work / "up.log", prefix="sunk-reconciler-deploy-", timings=stack_timings,
            label="deploy tests",
        ) as running:  # fmt: skip
            stack = running.stack
            admin = Kube.from_kubeconfig(stack.kube_paths.kubeconfig, field_manager="kubectl")
            # deploy/base, the tenant namespace and the scheduler's Roles there, printed by
            # `reconciler render-rbac fixtures/config-repo`, as a user's overlay holds them.
            objects = kustomize(ROOT / "deploy" / "example-namespace-scope")
            for obj in objects:  # everything but the Deployment, which needs an image
                if obj["kind"] != "Deployment":
                    admin.apply(obj, force=True)
            token = wait_for(lambda: _token_of(admin), 30, "the ServiceAccount's token")
            yield Deployed(stack, running.runtime, admin, repo, objects,
                           _kubeconfig_for(stack, token, work / "sa.kubeconfig"))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_every_object_passes_a_server_side_dry_run(deployed: Deployed) -> None:
    kinds = sorted(obj["kind"] for obj in deployed.objects)
    assert "Deployment" in kinds and "ServiceAccount" in kinds and "Role" in kinds
    for obj in deployed.objects:
        applied = deployed.admin.apply(obj, dry_run=True, force=True)
        assert applied["metadata"]["name"] == obj["metadata"]["name"]
    [deployment] = [o for o in deployed.objects if o["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].startswith("ghcr.io/") and container["args"][0] == "run"
    settings = next(o for o in deployed.objects if o["metadata"]["name"] == "reconciler-settings")
    assert yaml.safe_load(settings["data"]["config.yaml"])["leader-elect"] is True
    for obj in kustomize(ROOT / "deploy" / "cluster-scope"):
        deployed.admin.apply(obj, dry_run=True, force=True)


def test_the_flux_example_passes_a_server_side_dry_run(deployed: Deployed) -> None:
    objects = kustomize(ROOT / "deploy" / "flux")
    settings = next(o for o in objects if o["metadata"]["name"] == "reconciler-settings")
    config = yaml.safe_load(settings["data"]["config.yaml"])
    assert config["flux-git-repository"] == "flux-system/cluster-config"
    assert "git-url" not in config
    install_crd(deployed.admin)
    try:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}}
        deployed.admin.apply(namespace)
        for obj in objects:
            deployed.admin.apply(obj, dry_run=True, force=True)
    finally:
        remove_crd(deployed.admin)


def test_the_daemon_as_its_service_account_needs_every_rule_and_no_other(
    deployed: Deployed, tmp_path: Path
) -> None:
    secret = tmp_path / "webhook-secret"
    secret.write_text("webhook-secret-never-logged\n")
    daemon, port, log = _start_daemon(deployed, tmp_path, secret)
    try:
        wait_for(lambda: _get(port, "/readyz") == 200, 60, "readyz: " + log.read_text())
        for namespace in (NAMESPACE, "inference"):
            _pods_refused_bound_cancelled_and_deleted(deployed, namespace, log)
        _drift_that_needs_create_patch_and_delete(deployed)
        _a_cordon_that_drains_and_tells_the_node(deployed)
        _power_saving_switched_on_by_a_commit(deployed)
    finally:
        stop_cleanly(daemon, log)  # releases the Lease: an update
    calls = _audited_calls(deployed.stack)
    refused = sorted(c for c, code in calls.items() if code == 403)
    assert not refused, f"the RBAC refused the daemon: {refused}\n{log.read_text()}"
    unused = sorted(
        (rule for rule in _granted(deployed.objects) if not _used(rule, calls)),
        key=str,
    )
    assert not unused, f"deploy/ grants what the daemon never used: {unused}"
    _assert_json_logs_without_secrets(log, secret, deployed.sa_kubeconfig)


def test_a_cluster_wide_scope_is_served_under_deploy_cluster_scope(
    deployed: Deployed, tmp_path: Path
) -> None:
    """`scheduler.scope.type: cluster` had no ClusterRole in deploy/. With deploy/cluster-scope
    applied, the daemon as its ServiceAccount schedules a namespace no Role names (refused,
    bound, scancelled, deleted, a gang), is never refused, and uses every rule there. Last in
    the module: the repo's scope is changed (the scheduler reads it when it starts)."""
    namespace = "team-wide"
    for obj in kustomize(ROOT / "deploy" / "cluster-scope"):
        deployed.admin.apply(obj, force=True)
    deployed.admin.apply({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": namespace}})  # fmt: skip
    values = deployed.repo / "values.yaml"
    text = values.read_text()
    assert "    type: namespace\n" in text and "      inference: [1001]\n" in text
    wide = text.replace("    type: namespace\n", "    type: cluster\n")
    allowed = f"      inference: [1001]\n      {namespace}: [1001]\n"
    values.write_text(wide.replace("      inference: [1001]\n", allowed))
    secret = tmp_path / "webhook-secret"
    secret.write_text("webhook-secret-never-logged\n")
    daemon, port, log = _start_daemon(deployed, tmp_path, secret)
    try:
        wait_for(lambda: _get(port, "/readyz") == 200, 60, "readyz: " + log.read_text())
        _pods_refused_bound_cancelled_and_deleted(deployed, namespace, log)
    finally:
        stop_cleanly(daemon, log)
    calls = _audited_calls(deployed.stack)
    refused = sorted(c for c, code in calls.items() if code == 403)
    assert not refused, f"the RBAC refused the daemon: {refused}\n{log.read_text()}"
    # Calls in that namespace, the cluster-wide Pod list and watch (the scope is every
    # namespace), and the read of its Namespace (policies' namespaceObject).
    here = {c: code for c, code in calls.items()
            if c[0] == namespace or c[0:3] == ("", "", "pods")
            or c[2:4] == ("namespaces", namespace)}  # fmt: skip
    granted = _granted(kustomize(ROOT / "deploy" / "cluster-scope"))
    unused = sorted((rule for rule in granted if not _used(rule, here)), key=str)
    assert not unused, f"deploy/cluster-scope grants what the daemon never used: {unused}"


# ---- what the daemon is made to do --------------------------------------------------------


def _a_cordon_that_drains_and_tells_the_node(deployed: Deployed) -> None:
    """Node sync drains the Slurm node of a cordoned Node and resumes it on uncordon, each
    time with an Event on the Node (in "default", as kubelet's)."""
    pod = deployed.admin.get("v1", "Pod", "slurm-cpu-0", NAMESPACE) or {}
    node = pod["spec"]["nodeName"]

    def told(reason: str) -> bool:
        return any(e["involvedObject"].get("name") == node and e["reason"] == reason
                   for e in deployed.admin.list("v1", "Event", "default").items)  # fmt: skip

    for cordon, reason in ((True, wk.EVENT_SLURM_NODE_DRAINED),
                           (False, wk.EVENT_SLURM_NODE_RESUMED)):  # fmt: skip
        deployed.admin.request_json(  # what `kubectl cordon` / `uncordon` send
            "PATCH", f"/api/v1/nodes/{node}", body={"spec": {"unschedulable": cordon or None}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        wait_for(lambda r=reason: told(r), 30, f"{reason} on Node {node}")


def _power_saving_switched_on_by_a_commit(deployed: Deployed) -> None:
    """The revision that sets suspendTime makes the scheduler publish the Secret slurmctld's
    power programs read (server-side apply: `patch` on that one name). Last: the controller
    rolls; a long suspendTime powers nothing down meanwhile."""
    values = deployed.repo / "values.yaml"
    values.write_text(values.read_text().replace("suspendTime: INFINITE", "suspendTime: 3600"))
    wait_for(lambda: deployed.admin.get("v1", "Secret", "slurm-power-auth", NAMESPACE), 60,
             "the power Secret")  # fmt: skip


def _drift_that_needs_create_patch_and_delete(deployed: Deployed) -> None:
    """Objects deleted by hand (recreated), hand edits (reverted), and objects carrying our
    labels that the repo does not hold (pruned)."""
    admin = deployed.admin
    deleted = [("v1", "ConfigMap", "slurm-prolog"), ("v1", "Service", "slurm-compute"),
               ("apps/v1", "StatefulSet", "slurm-cpu"), ("apps/v1", "Deployment", "slurm-rest"),
               ("v1", "Secret", "slurm-jwt-key"),
               ("v1", "PersistentVolumeClaim", "slurm-controller-state")]  # fmt: skip
    for api_version, kind, name in deleted:
        admin.delete(api_version, kind, name, NAMESPACE)
    # No Pod uses the claim here, but its protection finalizer is lifted only by a controller
    # the local stack does not run: what an admin does by hand instead.
    admin.request_json(
        "PATCH", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/slurm-controller-state",
        body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json",
    )  # fmt: skip
    slurmd = {"name": "slurmd", "env": [{"name": "NCCL_DEBUG", "value": "TRACE"}]}
    admin.request_json(  # what `kubectl edit` does
        "PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/slurm-gpu-small",
        body={"spec": {"template": {"spec": {"containers": [slurmd]}}}},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    orphans = [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": unique("orphan"), "namespace": NAMESPACE, "labels": OWNED}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": unique("orphan"), "namespace": NAMESPACE, "labels": OWNED},
         "spec": {"clusterIP": "None", "ports": [{"port": 1, "protocol": "TCP"}]}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": {"name": unique("orphan"), "namespace": NAMESPACE, "labels": OWNED},
         "spec": {"replicas": 0, "serviceName": "none", "selector": {"matchLabels": {"a": "b"}},
                  "template": {"metadata": {"labels": {"a": "b"}},
                               "spec": {"containers": [{"name": "c", "image": "none"}]}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": unique("orphan"), "namespace": NAMESPACE, "labels": OWNED},
         "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
                  "template": {"metadata": {"labels": {"a": "b"}},
                               "spec": {"containers": [{"name": "c", "image": "none"}]}}}},
    ]  # fmt: skip
    for orphan in orphans:
        admin.apply(orphan)
    for api_version, kind, name in deleted:
        wait_for(lambda a=api_version, k=kind, n=name: admin.get(a, k, n, NAMESPACE), 30,
                 f"{kind} {name}, deleted by hand, to be recreated")  # fmt: skip
    wait_for(lambda: "TRACE" not in json.dumps(
        admin.get("apps/v1", "StatefulSet", "slurm-gpu-small", NAMESPACE)), 30,
        "the hand edit to be reverted")  # fmt: skip
    for orphan in orphans:
        api_version, kind, name = orphan["apiVersion"], orphan["kind"], orphan["metadata"]["name"]
        wait_for(lambda a=api_version, k=kind, n=name: admin.get(a, k, n, NAMESPACE) is None,
                 30, f"{kind} {name} to be pruned")  # fmt: skip


def _pods_refused_bound_cancelled_and_deleted(
    deployed: Deployed, namespace: str, log: Path
) -> None:
    """One Pod refused; one bound, then its job cancelled by scancel (the Pod is deleted);
    one bound, then deleted by hand (its job is cancelled once the Pod is confirmed gone)."""
    admin = deployed.admin
    slurm = deployed.stack.slurm
    assert slurm is not None
    refused, cancelled, deleted = unique("refused"), unique("scancel"), unique("deleted")
    admin.request_json("POST", f"/api/v1/namespaces/{namespace}/pods", body=_pod(refused, {}))
    for name in (cancelled, deleted):
        admin.request_json(
            "POST", f"/api/v1/namespaces/{namespace}/pods",
            body=_pod(name, {"cpu": "1", "memory": "256Mi"}),
        )  # fmt: skip
    wait_for(lambda: _annotation(admin, refused, namespace, wk.ANNOTATION_REJECTED), 30,
             f"{namespace}/{refused} to be refused: {log.read_text()}")  # fmt: skip
    jobs = {name: _bound_job(admin, namespace, name, log) for name in (cancelled, deleted)}
    _gang_of_one_bound_and_deleted(deployed, namespace, log)
    slurm.run("scancel", jobs[cancelled])
    wait_for(lambda: admin.get("v1", "Pod", cancelled, namespace) is None, 60,
             f"{namespace}/{cancelled} to be deleted after scancel")  # fmt: skip
    admin.delete("v1", "Pod", deleted, namespace)
    wait_for(lambda: "JobState=CANCELLED" in slurm.run("scontrol", "show", "job", "-o",
             jobs[deleted]), 60, f"the job of {namespace}/{deleted} to be cancelled")  # fmt: skip
    admin.delete("v1", "Pod", refused, namespace)


def _gang_of_one_bound_and_deleted(deployed: Deployed, namespace: str, log: Path) -> None:
    """A coscheduling PodGroup member: the scheduler reads its PodGroup (RBAC: get)."""
    admin = deployed.admin
    install_pod_group_crd(admin, namespace)
    group = unique("gang")
    create_pod_group(admin, namespace, group, 1)
    member = _pod(group, {"cpu": "1", "memory": "256Mi"})
    member["metadata"]["labels"] = {wk.LABEL_POD_GROUP: group}
    admin.request_json("POST", f"/api/v1/namespaces/{namespace}/pods", body=member)
    _bound_job(admin, namespace, group, log)
    admin.delete("v1", "Pod", group, namespace)


def _bound_job(admin: Kube, namespace: str, name: str, log: Path) -> str:
    return wait_for(
        lambda: (
            (admin.get("v1", "Pod", name, namespace) or {}).get("spec", {}).get("nodeName")
            and _annotation(admin, name, namespace, wk.ANNOTATION_JOB_ID)
        ),
        60,
        f"{namespace}/{name} to be bound: {log.read_text()}",
    )


def _pod(name: str, requests: dict[str, str]) -> dict[str, Any]:
    """A Pod whose job runs as uid 1001: the fixture repo lets root run only in namespace slurm
    (pod-user-id-allowed judges a Pod without user-id as root: a job's uid defaults to root)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {wk.ANNOTATION_USER_ID: "1001"}},
        "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 5,
                 "containers": [{"name": "main", "image": "ubuntu",
                                 "resources": {"requests": requests}}]},
    }  # fmt: skip


def _annotation(kube: Kube, pod: str, namespace: str, key: str) -> str | None:
    found = kube.get("v1", "Pod", pod, namespace) or {}
    return ((found.get("metadata") or {}).get("annotations") or {}).get(key)


# ---- the daemon as the ServiceAccount -----------------------------------------------------


def _token_of(admin: Kube) -> str | None:
    account = admin.get("v1", "ServiceAccount", "reconciler", NAMESPACE) or {}
    for ref in account.get("secrets") or ():
        found = admin.get("v1", "Secret", ref["name"], NAMESPACE) or {}
        token = (found.get("data") or {}).get("token")
        if token:
            return base64.b64decode(token).decode()
    return None


def _kubeconfig_for(stack: LocalStack, token: str, path: Path) -> Path:
    """The admin kubeconfig with the ServiceAccount's token in place of the admin's."""
    config = yaml.safe_load(stack.kube_paths.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def _start_daemon(
    deployed: Deployed, tmp_path: Path, secret: Path
) -> tuple[subprocess.Popen[bytes], int, Path]:
    port, log = free_port(), tmp_path / "run.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", "--source-dir", str(deployed.repo),
             "--runtime-dir", str(deployed.runtime), "--kubeconfig", str(deployed.sa_kubeconfig),
             "--leader-elect", "--lease-duration", "6", "--identity", "replica-a",
             "--interval", "1", "--resync", "2", "--node-sync-interval", "1",
             "--listen", f"127.0.0.1:{port}",
             "--hooks-api-bind-address", "127.0.0.1:0", "--webhook-secret-file", str(secret),
             "--workdir", str(tmp_path / "w"), "--log-format", "json"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return daemon, port, log


def _get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


# ---- RBAC granted and used ----------------------------------------------------------------

Call = tuple[str, str, str, str, str]  # namespace ("" cluster-wide), group, resource, name, verb


def _audited_calls(stack: LocalStack) -> dict[Call, int]:
    """Each (namespace, group, resource[/subresource], name, verb) the ServiceAccount asked
    for, with the worst HTTP status it got."""
    log = stack.kube_paths.audit_log
    wait_for(log.exists, 10, f"the audit log {log}")
    time.sleep(1)  # the last requests' ResponseComplete lines
    calls: dict[Call, int] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef")
        if event["user"]["username"] != SERVICE_ACCOUNT or not ref:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        call = (ref.get("namespace", ""), ref.get("apiGroup", ""), resource, ref.get("name", ""),
                event["verb"])  # fmt: skip
        code = event.get("responseStatus", {}).get("code", 0)
        calls[call] = max(calls.get(call, 0), code)
        if event["verb"] == "patch" and code == 201:
            # A server-side apply that creates: the API server checks `create` too, inside
            # the one request the audit log shows.
            calls[(*call[:4], "create")] = code
    return calls


def _granted(objects: list[dict[str, Any]]) -> set[tuple[str, str, str, str, str | None]]:
    """Each (namespace, group, resource, verb) a rule grants; with resourceNames, one per name
    (and the audited call must name it)."""
    granted: set[Any] = set()
    for role in objects:
        if role["kind"] not in ("Role", "ClusterRole"):
            continue
        namespace = role["metadata"].get("namespace", "")
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [None]:
                            granted.add((namespace, group, resource, verb, name))
    return granted


def _used(rule: tuple[str, str, str, str, str | None], calls: dict[Call, int]) -> bool:
    """A ClusterRole's rule (namespace "") is used by a call in any namespace."""
    namespace, group, resource, verb, name = rule
    return any(
        (c_group, c_resource, c_verb) == (group, resource, verb)
        and namespace in ("", c_namespace)
        and name in (None, c_name)
        for c_namespace, c_group, c_resource, c_name, c_verb in calls
    )


def _assert_json_logs_without_secrets(log: Path, secret: Path, kubeconfig: Path) -> None:
    text = log.read_text()
    for line in text.splitlines():
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(record), line
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    for value in (secret.read_text().strip(), token):
        assert value not in text, "a secret reached the log"
