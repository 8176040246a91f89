"""What the scheduler writes on Kubernetes about Pods: bindings, refusals, annotations, Events,
deletes, and the Secret its hook credentials derive from.

Writes that only inform users (Events, the job-id annotation) go out on a small pool of their
own, off the path from Pod to bound Pod: a failure is logged and nothing depends on them.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import KubeApiError, ReconcilerError
from reconciler.objects import ReadObj as Obj
from reconciler.scheduler.counters import Counters
from reconciler.scheduler.decide.admission import fingerprint

log = logging.getLogger(__name__)

EVENT_MESSAGE_LIMIT = 1024


class PodWriter:
    def __init__(self, kube: Kube, reporter: str, counters: Counters | None = None) -> None:
        self._kube = kube
        self._reporter = reporter  # the scheduler name, as Events' reporting controller
        self._writes = (counters or Counters()).api_writes  # by kind: what a Pod costs
        self._writes_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="scheduler-writes")

    def _wrote(self, kind: str) -> None:
        with self._writes_lock:
            self._writes[kind] += 1

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def bind(self, pod: Obj, node: str, annotations: Mapping[str, str]) -> bool:
        """Bind; False when the Pod was bound already (by our last run: the watch brings it)."""
        meta = pod["metadata"]
        self._wrote("binding")
        try:
            self._kube.bind_pod(
                meta["namespace"], meta["name"], node, pod_uid=meta["uid"],
                annotations=annotations,
            )  # fmt: skip
        except KubeApiError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def delete(self, pod: Obj) -> None:
        """With the Pod's own grace period."""
        meta = pod["metadata"]
        self._wrote("delete")
        self._kube.delete("v1", "Pod", meta["name"], meta["namespace"])

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._kube.get("v1", "Pod", name, namespace)

    def refuse(self, pod: Obj, message: str) -> None:
        """The refusal recorded (so the same Pod is not looked at again), PodScheduled=False
        and a Warning Event, each saying what to change."""
        meta = pod["metadata"]
        self.annotate(pod, {wk.ANNOTATION_REJECTED: fingerprint(pod)})
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._wrote("status")
        with contextlib.suppress(KubeApiError):  # the Pod may be gone: the Event still says it
            self._kube.apply(
                {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                 "status": {"conditions": [{
                     "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": message, "lastTransitionTime": now}]}},
                field_manager=wk.SCHEDULER_STATUS_MANAGER, force=True, subresource="status",
            )  # fmt: skip
        self.event(pod, wk.EVENT_REJECTED, "Scheduling", message, "Warning")

    def annotate(self, pod: Obj, annotations: Mapping[str, str | None]) -> None:
        """Merge-patch annotations (None removes one), through the Pod's status: the scheduler
        may not change a Pod's spec (no `pods` patch). A Pod gone meanwhile is fine."""
        meta = pod["metadata"]
        self._wrote("annotation")
        try:
            self._kube.annotate_pod(meta["namespace"], meta["name"], annotations)
        except KubeApiError as exc:
            if exc.status != 404:
                raise

    def annotate_later(self, pod: Obj, annotations: Mapping[str, str | None]) -> None:
        self._later(self.annotate, pod, annotations)

    def event(self, pod: Obj, reason: str, action: str, message: str, type: str = "Normal") -> None:
        """Sent in the background: Events never hold up scheduling."""
        self._wrote(f"event:{reason}")
        self._later(
            self._kube.create_event, pod, reason=reason, message=message[:EVENT_MESSAGE_LIMIT],
            action=action, type=type, reporting_controller=self._reporter,
            reporting_instance=self._reporter,
        )  # fmt: skip

    def _later(self, write: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        def run() -> None:
            try:
                write(*args, **kwargs)
            except ReconcilerError as exc:
                log.warning("scheduler: background write failed: %s", exc)

        with contextlib.suppress(RuntimeError):  # shutting down
            self._pool.submit(run)


def load_hooks_key(kube: Kube, namespace: str, name: str) -> bytes:
    """The HMAC key hook tokens derive from, in a Secret every replica shares, so tokens
    outlive a restart or a failover. Made on first use. Never a key of this process's own:
    the other replicas would refuse every call its jobs make."""
    secret = kube.get("v1", "Secret", name, namespace)
    if secret is None:
        secret = _make_hooks_secret(kube, namespace, name)
    key = (secret.get("data") or {}).get(wk.HOOKS_SECRET_KEY)
    if not key:
        raise ReconcilerError(
            f"Secret {namespace}/{name} has no key {wk.HOOKS_SECRET_KEY!r}",
            hint="delete it: the scheduler makes it again with a fresh key (running "
            "placeholder jobs then fall back on the poll)",
        )
    return base64.b64decode(key)


def _make_hooks_secret(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {wk.LABEL_MANAGED_BY: wk.MANAGED_BY_VALUE},
        },
        "type": "Opaque",
        "data": {wk.HOOKS_SECRET_KEY: base64.b64encode(secrets.token_bytes(32)).decode()},
    }
    try:
        made = kube.create(secret)
    except KubeApiError as error:
        raise ReconcilerError(
            f"cannot make the hooks API's key Secret {namespace}/{name}: {error.message}",
            hint="the scheduler's RBAC needs create on secrets in its namespace (deploy/)",
        ) from None
    if made is not None:
        return made
    theirs = kube.get("v1", "Secret", name, namespace)  # another replica made it first
    if theirs is None:
        raise ReconcilerError(
            f"Secret {namespace}/{name} exists (create said so) but cannot be read",
            hint="the scheduler's RBAC needs get on this Secret by name (deploy/)",
        )
    return theirs
