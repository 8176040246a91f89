"""Restarting slurmctld where it runs as our controller Deployment: what SUNK's "Slurm Workload
Manager" page's `kubectl rollout restart deployment <release>-controller` does, then a wait until
the new Pod is Ready and slurmctld answers. Jobs survive: their state is on the controller's
claim."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.compile.control_plane import controller_name
from reconciler.errors import ReconcilerError

POLL_SECONDS = 0.5


class RolloutError(ReconcilerError):
    """The controller Deployment did not come back in time."""


class DeploymentRestarter:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        release: str,
        answers: Callable[[], bool],
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = controller_name(release)
        self._release = release
        self._answers = answers  # slurmctld answers (through slurmrestd, say)
        self._now = now

    @classmethod
    def if_ours(
        cls, kube: Kube, namespace: str, release: str, answers: Callable[[], bool]
    ) -> DeploymentRestarter | None:
        """A restarter when the controller is our Deployment; None for a slurmctld outside
        Kubernetes (a hybrid cluster), which apply must not try to restart."""
        found = kube.get("apps/v1", "Deployment", controller_name(release), namespace)
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(wk.LABEL_MANAGED_BY) != wk.MANAGED_BY_VALUE:
            return None
        return cls(kube, namespace, release, answers)

    def nudge(self) -> None:
        """Annotate the controller's Pods, so kubelet updates their mounted ConfigMap now."""
        stamp = self._now().strftime("%Y-%m-%dT%H:%M:%SZ")
        selector = f"{wk.LABEL_NAME}=slurmctld,{wk.LABEL_RELEASE}={self._release}"
        for pod in self._kube.list("v1", "Pod", self._namespace, label_selector=selector).items:
            self._kube.annotate_pod(
                self._namespace, pod["metadata"]["name"], {wk.ANNOTATION_CONFIG_APPLIED: stamp}
            )

    def restart(self, timeout: float) -> None:
        generation = roll_deployment(self._kube, self._namespace, self._name, self._now())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self._kube.get("apps/v1", "Deployment", self._name, self._namespace)
            if current is not None and rolled_out(current, generation) and self._answers():
                return
            time.sleep(POLL_SECONDS)
        raise RolloutError(
            f"Deployment {self._namespace}/{self._name} did not roll out within {timeout:g} s",
            hint=f"kubectl -n {self._namespace} rollout status deployment {self._name}; "
            f"kubectl -n {self._namespace} logs -l app.kubernetes.io/name=slurmctld -c slurmctld",
        )


def roll_deployment(kube: Kube, namespace: str, name: str, now: datetime) -> int:
    """What `kubectl rollout restart deployment NAME` does; the generation to wait for."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    patched = kube.request_json(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        body={"spec": {"template": {"metadata": {
            "annotations": {wk.ANNOTATION_RESTARTED_AT: stamp}}}}},
        content_type="application/strategic-merge-patch+json",
        target=f"Deployment {namespace}/{name}",
    )  # fmt: skip
    return int(patched["metadata"].get("generation") or 0)


def rolled_out(deployment: dict[str, Any], generation: int) -> bool:
    """As `kubectl rollout status` judges it: the controller saw this generation, every
    replica runs the new template, and as many are ready as are wanted."""
    status = deployment.get("status") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    return (
        int(status.get("observedGeneration") or 0) >= generation
        and int(status.get("updatedReplicas") or 0) == wanted
        and int(status.get("replicas") or 0) == wanted
        and int(status.get("readyReplicas") or 0) == wanted
    )
