"""The Kubernetes adapter against a real kube-apiserver 1.20.2."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from reconciler.adapters.kube import Kube
from reconciler.errors import KubeApiError, KubeConflictError
from reconciler.wellknown import FIELD_MANAGER
from tests.integration.endpoints import KubeEndpoints

pytestmark = pytest.mark.integration

CRD_GROUP = "adapters.it.reconciler.sunk.dev"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def config_map(namespace: str, name: str, **data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


@pytest.fixture(scope="module")
def k(kube: KubeEndpoints) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(kube.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def namespace(k: Kube) -> Iterator[str]:
    name = unique("it-adapter")
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    k.delete("v1", "Namespace", name)


@pytest.fixture
def crd_kind(k: Kube) -> Iterator[str]:
    """A fresh namespaced CRD. Its watch cache starts at today's resourceVersion, so a watch from
    resourceVersion 1 is answered 410 Gone: the way to see an expired resourceVersion on demand."""
    plural = f"gizmo{uuid.uuid4().hex[:8]}s"
    kind = plural[:-1].capitalize()
    name = f"{plural}.{CRD_GROUP}"
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    k.apply({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": CRD_GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema}}],
        },
    })  # fmt: skip
    deadline = time.monotonic() + 30
    while not established(k.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)):
        assert time.monotonic() < deadline, "CRD not established"
        time.sleep(0.1)
    yield kind
    k.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)


def established(crd: dict | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def gizmo(kind: str, namespace: str, name: str) -> dict:
    return {
        "apiVersion": f"{CRD_GROUP}/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": 1},
    }


def test_apply_dry_run_get_list_delete(k: Kube, namespace: str) -> None:
    wanted = config_map(namespace, "settings", mode="fast")
    preview = k.apply(wanted, dry_run=True)
    assert preview["data"] == {"mode": "fast"}
    assert k.get("v1", "ConfigMap", "settings", namespace) is None  # dry run stored nothing

    stored = k.apply(wanted)
    managers = {f["manager"] for f in stored["metadata"]["managedFields"]}
    assert managers == {FIELD_MANAGER}
    got = k.get("v1", "ConfigMap", "settings", namespace)
    assert got is not None and got["metadata"]["uid"] == stored["metadata"]["uid"]

    listed = k.list("v1", "ConfigMap", namespace)
    assert [(o["kind"], o["metadata"]["name"]) for o in listed.items] == [("ConfigMap", "settings")]
    assert listed.resource_version

    assert k.delete("v1", "ConfigMap", "settings", namespace) is True
    assert k.delete("v1", "ConfigMap", "settings", namespace) is False
    assert k.get("v1", "ConfigMap", "settings", namespace) is None


def test_ssa_conflict_names_the_other_manager_and_field(k: Kube, namespace: str) -> None:
    k.apply(config_map(namespace, "shared", owner="them"), field_manager="it-other-manager")
    with pytest.raises(KubeConflictError) as caught:
        k.apply(config_map(namespace, "shared", owner="us"))
    assert caught.value.conflicts == (("it-other-manager", ".data.owner"),)
    assert caught.value.managers == ("it-other-manager",)
    assert caught.value.status == 409
    assert "it-other-manager" in str(caught.value)

    forced_preview = k.apply(config_map(namespace, "shared", owner="us"), force=True, dry_run=True)
    assert forced_preview["data"]["owner"] == "us"
    assert k.get("v1", "ConfigMap", "shared", namespace)["data"]["owner"] == "them"  # type: ignore[index]

    taken = k.apply(config_map(namespace, "shared", owner="us"), force=True)
    owners = {
        f["manager"] for f in taken["metadata"]["managedFields"] if "f:owner" in str(f["fieldsV1"])
    }
    assert owners == {FIELD_MANAGER}


def test_watch_relists_after_410_gone(k: Kube, namespace: str, crd_kind: str) -> None:
    api_version = f"{CRD_GROUP}/v1"
    k.apply(gizmo(crd_kind, namespace, "before"))
    watch = k.watch(api_version, crd_kind, namespace, resource_version="1", timeout_seconds=30)
    events = iter(watch)

    kind, obj = next(events)  # the server said 410 for "1": relisted, so "before" comes ADDED
    assert (kind, obj["metadata"]["name"], obj["kind"]) == ("ADDED", "before", crd_kind)
    assert watch.relists == 1

    k.apply(gizmo(crd_kind, namespace, "after"))
    kind, obj = next(events)
    assert (kind, obj["metadata"]["name"]) == ("ADDED", "after")

    k.delete(api_version, crd_kind, "before", namespace)
    kind, obj = next(events)
    assert (kind, obj["metadata"]["name"]) == ("DELETED", "before")
    assert watch.relists == 1
    events.close()


def test_watch_lists_first_then_streams_changes(k: Kube, namespace: str) -> None:
    k.apply(config_map(namespace, "first", v="1"))
    watch = k.watch("v1", "ConfigMap", namespace, timeout_seconds=30)
    events = iter(watch)
    kind, obj = next(events)
    assert (kind, obj["metadata"]["name"]) == ("ADDED", "first")

    changer = threading.Timer(0.3, lambda: k.apply(config_map(namespace, "first", v="2")))
    changer.start()
    kind, obj = next(events)
    changer.join()
    assert (kind, obj["data"]) == ("MODIFIED", {"v": "2"})
    assert watch.relists == 0
    watch.stop()
    events.close()


def test_watch_ends_at_its_timeout(k: Kube, namespace: str) -> None:
    started = time.monotonic()
    assert list(k.watch("v1", "ConfigMap", namespace, timeout_seconds=2)) == []
    assert 1.5 < time.monotonic() - started < 10


def test_pod_binding(k: Kube, namespace: str) -> None:
    pod = k.apply({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker", "namespace": namespace},
        "spec": {"schedulerName": "it-nobody", "containers": [{"name": "c", "image": "none"}]},
    })  # fmt: skip
    try:
        k.bind_pod(namespace, "worker", "it-node-1", pod_uid=pod["metadata"]["uid"])
        bound = k.get("v1", "Pod", "worker", namespace)
        assert bound is not None and bound["spec"]["nodeName"] == "it-node-1"
        with pytest.raises(KubeApiError) as caught:  # a pod is bound once
            k.bind_pod(namespace, "worker", "it-node-2")
        assert caught.value.status == 409
    finally:
        # No kubelet acknowledges a graceful delete of a bound pod: delete at once.
        k.delete("v1", "Pod", "worker", namespace, grace_period_seconds=0)


def test_pod_annotations_go_through_status_which_keeps_the_spec(k: Kube, namespace: str) -> None:
    """What lets the scheduler go without `patch` on pods: the status subresource takes
    annotations, and drops any change to the spec (a container's image) sent with them."""
    k.apply({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tenant", "namespace": namespace},
        "spec": {"schedulerName": "it-nobody", "containers": [{"name": "c", "image": "mine"}]},
    })  # fmt: skip
    try:
        k.annotate_pod(namespace, "tenant", {"example.com/note": "refused"})
        k.request_json(  # an image swap sent the same way
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/tenant/status",
            body={"metadata": {"annotations": {"example.com/other": "x"}},
                  "spec": {"containers": [{"name": "c", "image": "attacker"}]}},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
        pod = k.get("v1", "Pod", "tenant", namespace) or {}
        assert pod["spec"]["containers"][0]["image"] == "mine"
        assert pod["metadata"]["annotations"] == {
            "example.com/note": "refused", "example.com/other": "x",
        }  # fmt: skip
        k.annotate_pod(namespace, "tenant", {"example.com/note": None})
        pod = k.get("v1", "Pod", "tenant", namespace) or {}
        assert pod["metadata"]["annotations"] == {"example.com/other": "x"}
        with pytest.raises(KubeApiError) as caught:
            k.annotate_pod(namespace, "gone", {"example.com/note": "x"})
        assert caught.value.status == 404
    finally:
        k.delete("v1", "Pod", "tenant", namespace, grace_period_seconds=0)


def test_event_with_whole_second_time_is_accepted(k: Kube, namespace: str) -> None:
    regarding = k.apply(config_map(namespace, "subject"))
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # microsecond == 0: the 1.20 trap
    event = k.create_event(
        regarding, reason="Reconciled", message="applied 1 object", action="Apply", now=moment
    )
    assert event["eventTime"] == "2026-01-02T03:04:05.000000Z"
    assert event["involvedObject"]["uid"] == regarding["metadata"]["uid"]
    assert event["reportingComponent"] == FIELD_MANAGER
    names = [e["metadata"]["name"] for e in k.list("v1", "Event", namespace).items]
    assert event["metadata"]["name"] in names


def test_missing_objects_and_kinds(k: Kube, namespace: str) -> None:
    assert k.get("v1", "ConfigMap", "absent", namespace) is None
    with pytest.raises(KubeApiError, match="not served"):
        k.get("v1", "NoSuchKind", "x", namespace)
    with pytest.raises(KubeApiError, match="namespace is required"):
        k.get("v1", "ConfigMap", "x")


def test_invalid_object_is_a_typed_error(k: Kube, namespace: str) -> None:
    bad = config_map(namespace, "Not_A_Valid_Name")
    with pytest.raises(KubeApiError) as caught:
        k.apply(bad)
    assert caught.value.status == 422 and caught.value.reason == "Invalid"
