"""What `local up --kubelet` feeds its daemons, over plain data: cluster DNS records from
Services and Endpoints, kubelet and CNI configuration, the pause image's OCI archive.
(The cluster itself runs in tests/integration/test_kubelet_cluster.py.)"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from reconciler.errors import LocalStackError
from reconciler.local.kubelets.cluster_dns import hosts_text
from reconciler.local.kubelets.containerd import (
    ContainerdPaths,
    archive_image_names,
    cni_config,
    config_toml,
)
from reconciler.local.kubelets.nodes import kubelet_config, make_nodes
from reconciler.local.kubelets.pause_image import oci_archive


def _service(name: str, cluster_ip: str, **spec: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "slurm"},
            "spec": {"clusterIP": cluster_ip, **spec}}  # fmt: skip


def _endpoints(
    name: str, ready: list[dict[str, str]], not_ready: list[dict[str, str]] | None = None
) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "slurm"},
            "subsets": [{"addresses": ready, "notReadyAddresses": not_ready or []}]}  # fmt: skip


def test_a_cluster_ip_service_resolves_to_its_cluster_ip() -> None:
    text = hosts_text([_service("slurm-controller", "10.96.0.10")], [])
    assert text == "10.96.0.10 slurm-controller.slurm.svc.cluster.local\n"


def test_headless_service_pods_resolve_by_hostname_and_the_service_to_every_ready_pod() -> None:
    endpoints = _endpoints("slurm-compute", [
        {"ip": "10.214.1.5", "hostname": "slurm-cpu-0"},
        {"ip": "10.214.2.7", "hostname": "slurm-cpu-1"},
    ], [{"ip": "10.214.2.9", "hostname": "slurm-cpu-2"}])  # fmt: skip
    lines = hosts_text([_service("slurm-compute", "None")], [endpoints]).splitlines()
    assert "10.214.1.5 slurm-cpu-0.slurm-compute.slurm.svc.cluster.local" in lines
    assert "10.214.2.7 slurm-cpu-1.slurm-compute.slurm.svc.cluster.local" in lines
    assert "10.214.1.5 slurm-compute.slurm.svc.cluster.local" in lines
    assert not any("10.214.2.9" in line for line in lines)  # not ready: not published


def test_publish_not_ready_addresses_publishes_pods_before_they_are_ready() -> None:
    service = _service("slurm-compute", "None", publishNotReadyAddresses=True)
    endpoints = _endpoints("slurm-compute", [], [{"ip": "10.214.2.9", "hostname": "c-2"}])
    assert "10.214.2.9 c-2.slurm-compute.slurm.svc.cluster.local" in hosts_text(
        [service], [endpoints]
    )


def test_each_node_has_its_own_address_pod_subnet_and_bridge(tmp_path: Path) -> None:
    one, two = make_nodes(tmp_path, 2)
    assert (one.name, two.name) == ("node-1", "node-2")
    assert len({one.address, two.address}) == 2
    assert one.pod_subnet != two.pod_subnet and one.bridge != two.bridge
    assert one.base != two.base


def test_kubelet_serves_on_its_node_address_and_uses_the_cluster_dns(tmp_path: Path) -> None:
    node = make_nodes(tmp_path, 1)[0]
    config = kubelet_config(node, tmp_path / "ca.crt")
    assert config["address"] == config["healthzBindAddress"] == node.address
    assert config["clusterDomain"] == "cluster.local"
    assert config["cgroupDriver"] == "cgroupfs" and config["cgroupsPerQOS"] is False
    assert config["authentication"]["anonymous"] == {"enabled": False}  # type: ignore[index]


def test_containerd_restricts_oom_score_adj_and_uses_the_nodes_own_cni(tmp_path: Path) -> None:
    paths = ContainerdPaths(tmp_path / "node-1")
    text = config_toml(paths, "localhost/pause:1")
    assert "restrict_oom_score_adj = true" in text
    assert f'conf_dir = "{paths.cni_conf_dir}"' in text
    assert 'sandbox_image = "localhost/pause:1"' in text
    bridge = cni_config(paths, "node-1", "cni-kn1", "10.214.1.0/24")["plugins"][0]  # type: ignore[index]
    assert bridge["ipam"]["dataDir"] == str(paths.cni_data_dir)
    assert bridge["ipMasq"] is False


def test_the_pause_archive_names_its_image_for_ctr_import(tmp_path: Path) -> None:
    archive = oci_archive(tmp_path / "a.tar", "localhost/x/pause:1", {"pause": (b"x", 0o755)},
                          ["/pause"])  # fmt: skip
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        names = tar.getnames()
    manifest = index["manifests"][0]
    assert manifest["annotations"]["io.containerd.image.name"] == "localhost/x/pause:1"
    assert f"blobs/sha256/{manifest['digest'].split(':')[1]}" in names


def test_an_archive_naming_its_image_by_tag_alone_is_refused_before_ctr_misnames_it(
    tmp_path: Path,
) -> None:
    archive = oci_archive(tmp_path / "a.tar", "localhost/x/pause:1", {"p": (b"x", 0o755)}, ["/p"])
    assert archive_image_names(archive) == ["localhost/x/pause:1"]
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    index["manifests"][0]["annotations"] = {"org.opencontainers.image.ref.name": "24.11.5"}
    members["index.json"] = json.dumps(index).encode()
    bare = tmp_path / "bare.tar"
    with tarfile.open(bare, "w") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    with pytest.raises(LocalStackError, match="not a full reference"):
        archive_image_names(bare)
