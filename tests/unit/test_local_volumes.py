"""Pod volumes on the local stack's one filesystem: which host path a mount lands on, and the
files a ConfigMap or Secret volume shows, as kubelet mounts them (items, modes, subPath,
optional, missing objects)."""

from __future__ import annotations

import base64
import stat
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from reconciler.local.agent.volumes import HostLayout, Materializer, VolumeError, pod_mounts

Obj = dict[str, Any]


def pod(volumes: list[Obj], mounts: list[Obj], name: str = "p-0") -> Obj:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "containers": [{"name": "main", "volumeMounts": mounts}],
            "volumes": volumes,
        },
    }


def layout(tmp_path: Path) -> HostLayout:
    return HostLayout({PurePosixPath("/etc/slurm"): tmp_path / "etc"}, tmp_path / "pods")


def materializer(tmp_path: Path, objects: dict[tuple[str, str], Obj]) -> Materializer:
    return Materializer(layout(tmp_path), lambda kind, _ns, name: objects.get((kind, name)))


def secret(name: str, data: dict[str, bytes]) -> Obj:
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return {"kind": "Secret", "metadata": {"name": name}, "data": encoded}


def config_map(name: str, data: dict[str, str]) -> Obj:
    return {"kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_shared_paths_win_by_longest_prefix_and_the_rest_is_private(tmp_path: Path) -> None:
    table = HostLayout(
        {PurePosixPath("/etc/slurm"): tmp_path / "etc",
         PurePosixPath("/etc/slurm/prolog.d"): tmp_path / "prolog"},
        tmp_path / "pods",
    )  # fmt: skip
    assert table.host_path("ns", "a", PurePosixPath("/etc/slurm")) == tmp_path / "etc"
    assert table.host_path("ns", "a", PurePosixPath("/etc/slurm/x.conf")) == tmp_path / "etc/x.conf"
    assert table.host_path("ns", "a", PurePosixPath("/etc/slurm/prolog.d/1.sh")) == (
        tmp_path / "prolog/1.sh"
    )
    # /etc/slurmdbd is not under /etc/slurm: it is the Pod's own.
    assert table.host_path("ns", "a", PurePosixPath("/etc/slurmdbd")) == (
        tmp_path / "pods/ns_a/etc/slurmdbd"
    )


def test_config_map_and_secret_files_with_their_modes(tmp_path: Path) -> None:
    files = materializer(tmp_path, {
        ("ConfigMap", "conf"): config_map("conf", {"slurm.conf": "A=1\n", "gres.conf": "B\n"}),
        ("Secret", "keys"): secret("keys", {"jwt.key": b"\x00\x01"}),
    })  # fmt: skip
    the_pod = pod(
        [{"name": "c", "configMap": {"name": "conf"}},
         {"name": "k", "secret": {"secretName": "keys", "defaultMode": 0o400}}],
        [{"name": "c", "mountPath": "/etc/slurm"}, {"name": "k", "mountPath": "/etc/keys"}],
    )  # fmt: skip
    files.mount_all(the_pod)
    assert (tmp_path / "etc/slurm.conf").read_text() == "A=1\n"
    assert mode_of(tmp_path / "etc/slurm.conf") == 0o644  # Kubernetes' defaultMode
    key = tmp_path / "pods/ns_p-0/etc/keys/jwt.key"
    assert key.read_bytes() == b"\x00\x01" and mode_of(key) == 0o400


def test_items_select_and_rename_keys(tmp_path: Path) -> None:
    files = materializer(tmp_path, {("ConfigMap", "c"): config_map("c", {"a": "1", "b": "2"})})
    volume = {"name": "v", "configMap": {"name": "c", "items": [{"key": "b", "path": "bee"}]}}
    files.mount_all(pod([volume], [{"name": "v", "mountPath": "/x"}]))
    assert sorted(p.name for p in (tmp_path / "pods/ns_p-0/x").iterdir()) == ["bee"]


def test_sub_path_mounts_one_key_as_a_file(tmp_path: Path) -> None:
    files = materializer(tmp_path, {("Secret", "keys"): secret("keys", {"authorized_keys": b"k"})})
    volume = {"name": "k", "secret": {"secretName": "keys", "defaultMode": 0o600}}
    mount = {"name": "k", "mountPath": "/root/.ssh/authorized_keys", "subPath": "authorized_keys"}
    files.mount_all(pod([volume], [mount]))
    target = tmp_path / "pods/ns_p-0/root/.ssh/authorized_keys"
    assert target.read_bytes() == b"k" and mode_of(target) == 0o600


def test_sub_path_mounts_a_folder_that_items_lay_out(tmp_path: Path) -> None:
    """An s6 service folder: flat keys, nested item paths, a subPath naming the folder; an
    empty value is an empty file, and a sibling folder stays out."""
    data = {"a.type": "longrun\n", "a.run": "#!/bin/sh\n", "a.dep": "", "b.type": "oneshot\n"}
    files = materializer(tmp_path, {("ConfigMap", "s6"): config_map("s6", data)})
    items = [{"key": "a.type", "path": "rc/a/type"},
             {"key": "a.run", "path": "rc/a/run", "mode": 0o755},
             {"key": "a.dep", "path": "rc/a/dependencies.d/base"},
             {"key": "b.type", "path": "rc/b/type"}]  # fmt: skip
    volume = {"name": "v", "configMap": {"name": "s6", "items": items}}
    files.mount_all(pod([volume], [{"name": "v", "mountPath": "/etc/s6/a", "subPath": "rc/a"}]))
    service = tmp_path / "pods/ns_p-0/etc/s6/a"
    assert sorted(str(p.relative_to(service)) for p in service.rglob("*") if p.is_file()) == [
        "dependencies.d/base", "run", "type"
    ]  # fmt: skip
    assert (service / "type").read_text() == "longrun\n" and mode_of(service / "run") == 0o755
    assert (service / "dependencies.d/base").read_bytes() == b""
    with pytest.raises(VolumeError, match="no key 'rc/c'"):
        files.mount_all(pod([volume], [{"name": "v", "mountPath": "/c", "subPath": "rc/c"}]))


def test_a_missing_object_stops_the_pod_unless_optional(tmp_path: Path) -> None:
    files = materializer(tmp_path, {})
    required = pod([{"name": "k", "secret": {"secretName": "gone"}}],
                   [{"name": "k", "mountPath": "/k"}])  # fmt: skip
    with pytest.raises(VolumeError, match="Secret 'gone', which does not exist"):
        files.mount_all(required)
    optional = pod([{"name": "k", "secret": {"secretName": "gone", "optional": True}}],
                   [{"name": "k", "mountPath": "/k"}])  # fmt: skip
    files.mount_all(optional)  # an empty volume, as kubelet mounts it


def test_refresh_rewrites_changed_data_but_never_a_sub_path(tmp_path: Path) -> None:
    objects = {("ConfigMap", "conf"): config_map("conf", {"slurm.conf": "old\n"})}
    files = materializer(tmp_path, objects)
    the_pod = pod(
        [{"name": "c", "configMap": {"name": "conf"}}],
        [{"name": "c", "mountPath": "/etc/slurm"},
         {"name": "c", "mountPath": "/pinned.conf", "subPath": "slurm.conf"}],
    )  # fmt: skip
    files.mount_all(the_pod)
    objects[("ConfigMap", "conf")] = config_map("conf", {"slurm.conf": "new\n"})
    assert files.refresh(the_pod, "ConfigMap", "conf")
    assert (tmp_path / "etc/slurm.conf").read_text() == "new\n"
    assert (tmp_path / "pods/ns_p-0/pinned.conf").read_text() == "old\n"
    assert not files.refresh(the_pod, "ConfigMap", "other")


def test_claims_and_empty_dirs_are_directories(tmp_path: Path) -> None:
    files = materializer(tmp_path, {})
    the_pod = pod([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                   {"name": "e", "emptyDir": {}}],
                  [{"name": "d", "mountPath": "/var/lib/mysql"},
                   {"name": "e", "mountPath": "/tmp/scratch"}])  # fmt: skip
    files.mount_all(the_pod)
    assert (tmp_path / "pods/ns_p-0/var/lib/mysql").is_dir()
    assert [m.object_name for m in pod_mounts(the_pod)] == ["data", ""]


def test_a_mount_of_an_undefined_volume_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match="'nope', which the Pod does not define"):
        pod_mounts(pod([], [{"name": "nope", "mountPath": "/x"}]))
