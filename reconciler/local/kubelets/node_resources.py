"""What the kubelet cluster adds to its Nodes and claims that a cloud would provide: GPUs as
extended resources, and a hostPath volume for every claim left Pending (no storage
provisioner runs here).

Volumes live under the runtime directory, which every Node's mount namespace still shows
(netns.py binds only /var/lib, /var/log and /run), so a Pod finds its data on whichever
Node it lands. They are made world-writable: the Slurm daemons run as their own users and
kubelet does not chown a hostPath for fsGroup.
"""

from __future__ import annotations

from pathlib import Path

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.local.agent.placement import volume_for
from reconciler.local.poller import Poller

POLL_SECONDS = 0.5


def advertise_gpus(kube: Kube, node: str, count: int) -> None:
    """Fake GPUs as extended resources in the Node's capacity (kubelet keeps what it does not
    manage itself), as Kubernetes documents for advertising extended resources."""
    patch = [
        {"op": "add", "path": f"/status/capacity/{resource.replace('/', '~1')}",
         "value": str(count)}
        for resource in (wk.RESOURCE_NVIDIA_GPU, wk.RESOURCE_SUNK_ACCELERATOR)
    ]  # fmt: skip
    kube.request_json("PATCH", f"/api/v1/nodes/{node}/status", body=patch,
                      content_type="application/json-patch+json")  # fmt: skip


class VolumeProvisioner:
    """Binds each Pending claim to a new pre-bound hostPath PersistentVolume."""

    def __init__(self, kube: Kube, root: Path) -> None:
        self.kube = kube
        self.root = root
        self._poller = Poller(self.provision, POLL_SECONDS, "volumes")

    def start(self) -> None:
        self._poller.start()

    def stop(self) -> None:
        self._poller.stop()

    def provision(self) -> list[str]:
        """A volume for every Pending claim; the names of the claims served."""
        served = []
        for claim in self.kube.list("v1", "PersistentVolumeClaim").items:
            if (claim.get("status") or {}).get("phase") != "Pending":
                continue
            meta = claim["metadata"]
            path = self.root / f"{meta['namespace']}_{meta['name']}"
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)
            volume = volume_for(claim, str(path))
            if self.kube.get("v1", "PersistentVolume", volume["metadata"]["name"]) is None:
                self.kube.create(volume)
                served.append(f"{meta['namespace']}/{meta['name']}")
        return served
