"""The Kubernetes wire format, without a connection: what the API server's answers mean and
what its requests look like.

Resource paths and the discovery listing they come from, list items with their kind restored,
MicroTime and Time values, Event bodies, and the typed errors a non-2xx Status maps to. Kept apart
from the client in kube.py so they can be read and tested without an API server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from reconciler.errors import KubeApiError, KubeConflictError
from reconciler.objects import Obj


@dataclass(frozen=True)
class ObjectList:
    """All objects of one kind (items are full dicts) and the list's resourceVersion."""

    items: tuple[Obj, ...]
    resource_version: str


@dataclass(frozen=True)
class Resource:
    """Where a kind lives: `/api/v1` or `/apis/<group>/<version>`, its plural, its scope."""

    base: str
    plural: str
    namespaced: bool
    kind: str

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        path = self.base
        if self.namespaced and namespace:
            path += f"/namespaces/{path_segment(namespace)}"
        path += f"/{self.plural}"
        return path + f"/{path_segment(name)}" if name else path


def micro_time(moment: datetime) -> str:
    """A MicroTime: UTC, always six fractional digits, "Z"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def whole_seconds_time(moment: datetime) -> str:
    """A metav1.Time: UTC, seconds precision, "Z"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_CONFLICT_MANAGER = re.compile(r'conflict with "([^"]*)"')


def conflicts_of(status: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(manager, field) pairs of a 409 apply Status, e.g. ("mgr-a", ".data.k")."""
    found = []
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") != "FieldManagerConflict":
            continue
        match = _CONFLICT_MANAGER.search(str(cause.get("message", "")))
        found.append((match.group(1) if match else "?", str(cause.get("field", ""))))
    return found


def api_error(status: int, payload: bytes, target: str) -> KubeApiError:
    """A typed error from a non-2xx answer (a Status object, or whatever came instead)."""
    try:
        body = json.loads(payload) if payload else {}
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    message = str(body.get("message") or payload[:200].decode(errors="replace") or f"HTTP {status}")
    conflicts = conflicts_of(body) if status == 409 else []
    if conflicts:
        return KubeConflictError(message, target=target, conflicts=conflicts)
    return KubeApiError(message, status=status, reason=str(body.get("reason", "")), target=target)


def object_target(obj: Mapping[str, Any]) -> str:
    """Kind and namespace/name, for error messages."""
    meta = obj.get("metadata") or {}
    name = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    return f"{obj.get('kind')} {name}"


def typed_items(page: Mapping[str, Any]) -> list[Obj]:
    """A list's items with apiVersion/kind set: the server leaves them out of list items."""
    kind = str(page.get("kind", "")).removesuffix("List")
    api_version = page.get("apiVersion")
    return [{"apiVersion": api_version, "kind": kind, **item} for item in page.get("items") or []]


def resources_of(base: str, listing: Mapping[str, Any]) -> dict[str, Resource]:
    """kind -> Resource from an APIResourceList, skipping subresources like pods/status."""
    found = {}
    for entry in listing.get("resources") or []:
        if "/" in entry.get("name", ""):
            continue
        found[entry["kind"]] = Resource(
            base, entry["name"], bool(entry.get("namespaced")), entry["kind"]
        )
    return found


def event_for(
    regarding: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    action: str,
    type: str,
    controller: str,
    instance: str,
    now: datetime,
) -> Obj:
    """A core/v1 Event body. A cluster-scoped object's (a Node's) goes to "default" as
    kubelet's do, without eventTime: the API server takes an Event with eventTime about a
    cluster-scoped object only in kube-system."""
    meta = regarding.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    involved = {
        "apiVersion": regarding.get("apiVersion"),
        "kind": regarding.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
    }
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
        "involvedObject": {k: v for k, v in involved.items() if v},
        "reason": reason,
        "message": message,
        "type": type,
        "action": action,
        "count": 1,
        "firstTimestamp": whole_seconds_time(now),
        "lastTimestamp": whole_seconds_time(now),
        "eventTime": micro_time(now),
        "source": {"component": controller},
        "reportingComponent": controller,
        "reportingInstance": instance,
    }
    if not meta.get("namespace"):
        del event["eventTime"]
    return event


def selector_query(label_selector: str | None, field_selector: str | None) -> list[tuple[str, str]]:
    """The query parameters of a list or watch that filters by label and/or field."""
    query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def path_segment(value: str) -> str:
    """A name or namespace as one path segment; a slash or dot name would reach another path."""
    if not value or "/" in value or value in (".", ".."):
        raise KubeApiError(f"invalid name {value!r}", status=400, reason="Invalid")
    return quote(value, safe="")
