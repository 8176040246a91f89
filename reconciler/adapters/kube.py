"""Kubernetes through the official client's ApiClient: plain dicts in, plain dicts out.

Every call is a raw request (`param_serialize` + `call_api`) so the client's typed models never
reach the caller and never get in the way: server-side apply needs the
`application/apply-patch+yaml` content type, a pod binding answers a Status that the typed
`create_namespaced_binding` cannot parse, and MicroTime fields must always carry six fractional
digits (1.20 rejects "...:05Z" in `eventTime`, which is what a datetime with zero microseconds
serializes to). Checked against kube-apiserver 1.20.2 and kubernetes-client 37.

Objects are named by (apiVersion, kind); the resource path comes from API discovery, cached per
apiVersion and refreshed once when a kind is missing (a CRD created a moment ago).

What needs no connection (paths, list items, times, Event bodies, error mapping) is in
kube_wire.py; watches are in kube_watch.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import config as kube_config
from kubernetes.client import ApiClient
from kubernetes.client import Configuration as KubeConfiguration

from reconciler.adapters.kube_watch import KubeWatch, Shape, decode_list
from reconciler.adapters.kube_wire import (
    Obj,
    ObjectList,
    Resource,
    api_error,
    event_for,
    object_target,
    path_segment,
    resources_of,
    selector_query,
    typed_items,
)
from reconciler.errors import KubeApiError
from reconciler.wellknown import FIELD_MANAGER

DEFAULT_TIMEOUT_SECONDS = 30.0
CONNECTION_POOL_SIZE = 32
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
_LIST_PAGE = 500
# A shaped list keeps little of each object, but a page is read whole first (its bytes and
# their text): at etcd's 1.5 MiB per object, 32 objects are under 100 MiB at once.
_SHAPED_PAGE = 32


# Query pairs of a list (labelSelector, fieldSelector): outside the class, whose `list`
# method would shadow the builtin in its annotations.
Selectors = list[tuple[str, str]]


class Kube:
    """A thin, dict-only client for one cluster."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        field_manager: str = FIELD_MANAGER,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self._api = api_client
        self.field_manager = field_manager
        self.timeout = timeout
        self._discovered: dict[str, dict[str, Resource]] = {}

    @classmethod
    def from_kubeconfig(
        cls, path: Path | None, *, context: str | None = None, field_manager: str = FIELD_MANAGER
    ) -> Kube:
        """A kubeconfig file; None means in a Pod, with its service account's token."""
        configuration = KubeConfiguration()
        # Watches, workers and event writers share the pool; the default 10 drops connections.
        configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
        try:
            if path is None:
                # The loader rereads the token file: projected tokens expire every hour.
                kube_config.load_incluster_config(client_configuration=configuration)
                return cls(ApiClient(configuration), field_manager=field_manager)
            client = kube_config.new_client_from_config(
                config_file=str(path), context=context, client_configuration=configuration
            )
        except (kube_config.ConfigException, OSError) as exc:
            where = "the Pod's service account" if path is None else f"kubeconfig {path}"
            raise KubeApiError(
                f"cannot use {where}: {exc}",
                hint="pass --kubeconfig FILE, or set $KUBECONFIG",
            ) from None
        return cls(client, field_manager=field_manager)

    def close(self) -> None:
        self._api.close()

    def version(self) -> Obj:
        return self.request_json("GET", "/version", target="version")

    def resource(self, api_version: str, kind: str) -> Resource:
        found = self._discover(api_version, refresh=False).get(kind)
        if found is None:  # maybe a CRD established since the last discovery
            found = self._discover(api_version, refresh=True).get(kind)
        if found is None:
            raise KubeApiError(
                f"kind {kind} is not served by {api_version}", status=404, reason="NotFound"
            )
        return found

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        path = self._path(api_version, kind, namespace, name)
        response = self._call("GET", path)
        payload = response.read()
        if response.status == 404:
            return None
        return self._decoded(response.status, payload, f"{kind} {name}")

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shape: Shape | None = None,
    ) -> ObjectList:
        """All matching objects, each with its apiVersion and kind filled in; each passed
        through `shape` (the object, its JSON's size) as it is decoded, if given."""
        path = self.resource(api_version, kind).path(namespace)
        return self.list_path(path, selector_query(label_selector, field_selector), shape=shape)

    def list_path(
        self, path: str, selectors: Selectors, *, shape: Shape | None = None
    ) -> ObjectList:
        """List a resource path page by page; restarts when a continue token expires (410)."""
        while True:
            try:
                return self._list_pages(path, selectors, shape)
            except KubeApiError as error:
                if error.status != 410:
                    raise

    def apply(
        self,
        obj: Mapping[str, Any],
        *,
        force: bool = False,
        dry_run: bool = False,
        field_manager: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        """Server-side apply; returns the object as stored (or as it would be, with dry_run).

        A field another manager owns raises KubeConflictError unless force takes it over.
        """
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name or not obj.get("apiVersion") or not obj.get("kind"):
            raise KubeApiError("apply needs apiVersion, kind and metadata.name", status=400)
        path = self._path(obj["apiVersion"], obj["kind"], meta.get("namespace"), name)
        query = [("fieldManager", field_manager or self.field_manager)]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        if subresource:
            path += f"/{path_segment(subresource)}"
        return self.request_json(
            "PATCH",
            path,
            query=query,
            body=dict(obj),
            content_type=APPLY_CONTENT_TYPE,
            target=object_target(obj),
        )

    def create(self, obj: Mapping[str, Any]) -> Obj | None:
        """Create `obj` (POST); None when one of that name exists already (kept as it is)."""
        meta = obj.get("metadata") or {}
        path = self._path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        collection = path.rsplit("/", 1)[0]
        try:
            return self.request_json("POST", collection, body=dict(obj),
                                     target=object_target(obj))  # fmt: skip
        except KubeApiError as error:
            if error.status == 409:
                return None
            raise

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> bool:
        """True when a delete was accepted (the object may linger on finalizers); False when it
        was already gone."""
        path = self._path(api_version, kind, namespace, name)
        options: Obj = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        query = [("dryRun", "All")] if dry_run else []
        response = self._call("DELETE", path, query=query, body=options)
        payload = response.read()
        if response.status == 404:
            return False
        self._decoded(response.status, payload, f"{kind} {name}")
        return True

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: float | None = None,
        shape: Shape | None = None,
    ) -> KubeWatch:
        """(event_type, object) pairs that survive 410 Gone by relisting; see KubeWatch."""
        resource = self.resource(api_version, kind)
        return KubeWatch(
            self,
            resource.path(namespace),
            selectors=selector_query(label_selector, field_selector),
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            shape=shape,
        )

    def bind_pod(
        self,
        namespace: str,
        pod: str,
        node: str,
        *,
        pod_uid: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Schedule a pod onto a node (what a scheduler does); 409 if it is already bound.

        pod_uid goes into the Binding's metadata: API servers that check it (1.20 does not) then
        refuse to bind a newer pod of the same name. The API server copies the Binding's
        annotations onto the Pod in the same write, so they are there exactly when it is bound.
        """
        binding: Obj = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        if pod_uid:
            binding["metadata"]["uid"] = pod_uid
        if annotations:
            binding["metadata"]["annotations"] = dict(annotations)
        path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(pod)}/binding"
        self.request_json("POST", path, body=binding, target=f"Pod {namespace}/{pod}")

    def annotate_pod(
        self,
        namespace: str,
        pod: str,
        annotations: Mapping[str, str | None],
        *,
        field_manager: str | None = None,
    ) -> Obj:
        """Merge-patch a Pod's annotations (None removes one) through its status subresource.

        The API server keeps a Pod's spec on that path (its status strategy resets spec,
        deletionTimestamp and ownerReferences, from 1.20 to today), so the writer needs
        `pods/status` patch, not `pods` patch: that one could change a container's image, and
        RBAC cannot narrow a patch to some fields.
        """
        path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(pod)}/status"
        return self.request_json(
            "PATCH", path, query=[("fieldManager", field_manager)] if field_manager else [],
            body={"metadata": {"annotations": dict(annotations)}},
            content_type="application/merge-patch+json", target=f"Pod {namespace}/{pod}",
        )  # fmt: skip

    def create_event(
        self,
        regarding: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        action: str,
        type: str = "Normal",
        reporting_controller: str = FIELD_MANAGER,
        reporting_instance: str = FIELD_MANAGER,
        now: datetime | None = None,
    ) -> Obj:
        """A core/v1 Event about `regarding` (any object dict); returns the stored Event."""
        event = event_for(
            regarding,
            reason=reason,
            message=message,
            action=action,
            type=type,
            controller=reporting_controller,
            instance=reporting_instance,
            now=now or datetime.now(UTC),
        )
        namespace = event["metadata"]["namespace"]
        path = f"/api/v1/namespaces/{path_segment(namespace)}/events"
        return self.request_json("POST", path, body=event, target=object_target(regarding))

    # -- raw requests ------------------------------------------------------------------------

    def request_json(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        target: str = "",
    ) -> Obj:
        response = self._call(method, path, query=query, body=body, content_type=content_type)
        return self._decoded(response.status, response.read(), target or path)

    def open_stream(self, path: str, query: Iterable[tuple[str, str]], read_timeout: float) -> Any:
        """A streaming GET (a watch); returns the urllib3 response to read lines from."""
        response = self._call("GET", path, query=query, timeout=(self.timeout, read_timeout))
        if not 200 <= response.status < 300:
            raise api_error(response.status, response.read(), path)
        return response.response

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self._api.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            return self._api.call_api(*request, _request_timeout=timeout or self.timeout)
        except urllib3.exceptions.HTTPError as error:
            host = self._api.configuration.host
            raise KubeApiError(
                f"API server {host} unreachable: {type(error).__name__}", target=f"{method} {path}"
            ) from None

    @staticmethod
    def _decoded(status: int, payload: bytes, target: str) -> Obj:
        if not 200 <= status < 300:
            raise api_error(status, payload, target)
        decoded = json.loads(payload) if payload else {}
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def _list_pages(self, path: str, selectors: Selectors, shape: Shape | None) -> ObjectList:
        items: list[Obj] = []
        token = ""
        while True:
            query = [*selectors, ("limit", str(_LIST_PAGE if shape is None else _SHAPED_PAGE))]
            if token:
                query.append(("continue", token))
            if shape is None:
                page = self.request_json("GET", path, query=query, target=path)
            else:
                response = self._call("GET", path, query=query)
                payload = response.read()
                if not 200 <= response.status < 300:
                    raise api_error(response.status, payload, path)
                page = decode_list(payload, shape)
            items.extend(typed_items(page))
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return ObjectList(tuple(items), str(meta.get("resourceVersion", "")))

    def _path(self, api_version: str, kind: str, namespace: str | None, name: str) -> str:
        resource = self.resource(api_version, kind)
        if resource.namespaced and not namespace:
            raise KubeApiError(f"{kind} {name}: a namespace is required", status=400)
        return resource.path(namespace, name)

    def _discover(self, api_version: str, *, refresh: bool) -> dict[str, Resource]:
        if refresh or api_version not in self._discovered:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = self.request_json("GET", base, target=f"discovery {api_version}")
            self._discovered[api_version] = resources_of(base, listing)
        return self._discovered[api_version]
