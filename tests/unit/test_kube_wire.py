"""Pure parts of the Kubernetes adapter: error mapping, times, discovery, relist differences."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from reconciler.adapters.kube_watch import relist_events, stub_of
from reconciler.adapters.kube_wire import (
    Resource,
    api_error,
    conflicts_of,
    event_for,
    micro_time,
    resources_of,
    typed_items,
)
from reconciler.errors import KubeApiError, KubeConflictError

# As kube-apiserver 1.20.2 answered two managers applying .data.k.
CONFLICT = {
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
    "message": 'Apply failed with 1 conflict: conflict with "mgr-a": .data.k',
    "details": {"causes": [
        {"reason": "FieldManagerConflict", "message": 'conflict with "mgr-a"', "field": ".data.k"},
    ]},
}  # fmt: skip


def obj(name: str, rv: str, uid: str | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}",
                     "resourceVersion": rv},
        "data": {"big": "x" * 100},
    }  # fmt: skip


def test_apply_conflict_becomes_a_typed_error_with_managers_and_fields() -> None:
    error = api_error(409, json.dumps(CONFLICT).encode(), "ConfigMap ns/c1")
    assert isinstance(error, KubeConflictError)
    assert error.conflicts == (("mgr-a", ".data.k"),)
    assert error.managers == ("mgr-a",)
    assert str(error).startswith("ConfigMap ns/c1: Apply failed with 1 conflict")
    assert error.hint is not None and "mgr-a" in error.hint


def test_conflict_message_with_api_version_suffix() -> None:
    status = {"details": {"causes": [{"reason": "FieldManagerConflict",
                                      "message": 'conflict with "kubectl" using apps/v1',
                                      "field": ".spec.replicas"}]}}  # fmt: skip
    assert conflicts_of(status) == [("kubectl", ".spec.replicas")]


def test_other_409_is_a_plain_api_error() -> None:
    status = {"kind": "Status", "reason": "AlreadyExists", "code": 409, "message": "exists"}
    error = api_error(409, json.dumps(status).encode(), "Pod ns/p")
    assert type(error) is KubeApiError
    assert (error.status, error.reason) == (409, "AlreadyExists")


def test_non_json_error_body_is_kept_short() -> None:
    error = api_error(502, b"<html>" + b"x" * 1000, "GET /api/v1")
    assert error.status == 502 and len(str(error)) < 300


def test_micro_time_always_has_six_digits_and_is_utc() -> None:
    assert micro_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000000Z"
    plus_two = timezone(timedelta(hours=2))
    moment = datetime(2026, 1, 2, 5, 4, 5, 7, tzinfo=plus_two)
    assert micro_time(moment) == "2026-01-02T03:04:05.000007Z"


def test_event_for_a_cluster_scoped_object_goes_to_default() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}}
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    event = event_for(node, reason="Drained", message="m", action="Drain", type="Warning",
                      controller="c", instance="i", now=moment)  # fmt: skip
    assert event["metadata"] == {"generateName": "n1.", "namespace": "default"}
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": "u1",
    }
    # The API server refuses eventTime on an Event about a cluster-scoped object outside
    # kube-system (seen against kube-apiserver 1.20): a legacy Event, as kubelet writes.
    assert "eventTime" not in event and event["firstTimestamp"] == "2026-01-02T03:04:05Z"


def test_list_items_get_their_kind_back() -> None:
    page = {"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "p"}}]}
    assert typed_items(page) == [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]


def test_discovery_skips_subresources_and_builds_paths() -> None:
    listing = {"resources": [
        {"name": "pods", "namespaced": True, "kind": "Pod"},
        {"name": "pods/binding", "namespaced": True, "kind": "Binding"},
        {"name": "nodes", "namespaced": False, "kind": "Node"},
    ]}  # fmt: skip
    found = resources_of("/api/v1", listing)
    assert set(found) == {"Pod", "Node"}
    assert found["Pod"].path("ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert found["Pod"].path() == "/api/v1/pods"
    assert found["Node"].path("ignored", "n") == "/api/v1/nodes/n"
    crd = Resource("/apis/x.io/v1", "gizmos", True, "Gizmo")
    assert crd.path("ns") == "/apis/x.io/v1/namespaces/ns/gizmos"


def test_relist_reports_added_modified_deleted_and_skips_unchanged() -> None:
    known: dict[str, dict] = {}
    first = relist_events(known, (obj("a", "1"), obj("b", "1"), obj("c", "1")))
    assert [(kind, o["metadata"]["name"]) for kind, o in first] == [
        ("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"),
    ]  # fmt: skip
    second = relist_events(known, (obj("a", "1"), obj("b", "5"), obj("d", "6")))
    assert [(kind, o["metadata"]["name"]) for kind, o in second] == [
        ("DELETED", "c"), ("MODIFIED", "b"), ("ADDED", "d"),
    ]  # fmt: skip
    deleted = second[0][1]
    assert "data" not in deleted and deleted["metadata"]["uid"] == "uid-c"  # a stub


def test_recreated_object_with_same_name_is_deleted_then_added() -> None:
    known: dict[str, dict] = {}
    relist_events(known, (obj("a", "1", uid="old"),))
    events = relist_events(known, (obj("a", "9", uid="new"),))
    assert [(kind, o["metadata"]["uid"]) for kind, o in events] == [
        ("DELETED", "old"), ("ADDED", "new"),
    ]  # fmt: skip


def test_stub_keeps_identity_only() -> None:
    assert stub_of(obj("a", "3")) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns", "uid": "uid-a", "resourceVersion": "3"},
    }
