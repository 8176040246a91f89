"""What a list and its watches reported outlives each watch, so the relist after
a long API server outage (410) reports the objects deleted meanwhile."""

from __future__ import annotations

from typing import Any

from reconciler.adapters.kube_watch import WatchMemory, relist_events


def pod(name: str, version: str, uid: str | None = None) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "resourceVersion": version,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": "n1"}}


def test_the_listing_is_remembered_as_stubs_with_its_version() -> None:
    memory = WatchMemory.of_listing((pod("a", "5"), pod("b", "6")), "7")
    assert memory.resource_version == "7"
    assert set(memory.known) == {"uid-a", "uid-b"}
    assert "spec" not in memory.known["uid-a"]  # keys and versions only, never whole Pods


def test_a_relist_against_the_memory_reports_what_was_deleted_while_nobody_watched() -> None:
    memory = WatchMemory.of_listing((pod("a", "5"), pod("b", "6")), "7")
    events = relist_events(memory.known, (pod("b", "6"), pod("c", "9")))
    assert [(kind, obj["metadata"]["name"]) for kind, obj in events] == [
        ("DELETED", "a"), ("ADDED", "c"),
    ]  # fmt: skip
    assert set(memory.known) == {"uid-b", "uid-c"}  # the next watch starts from this
