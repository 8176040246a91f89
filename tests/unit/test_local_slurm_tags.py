"""Which Slurm install each Pod runs on the local stack, by its image's tag
($SUNK_RECONCILER_SLURM_TAGS): over plain Pods as the node agent sees them. A live upgrade by
hand changes the repo's image tag; only a mapped tag moves a daemon to another install."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from reconciler.errors import LocalStackError
from reconciler.local.processes import Supervisor
from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.local.slurm.install import for_prefix, installs_by_tag
from reconciler.local.slurm.site import SlurmPaths, SlurmPorts
from reconciler.local.slurm.tags import (
    controller_pod,
    image_tag,
    mapped_install,
    parse_tags,
    tag_mismatch,
    unmapped_note,
)
from reconciler.slurm_release import SlurmRelease
from tests.unit.test_local_slurm_install import fake_prefix

TAGS = parse_tags("25.11.7=/opt/slurm-hand/25.11.7, 26.05.3=/opt/slurm-hand/26.05.3")


def pod(app: str, image: str, *sidecars: str) -> dict[str, Any]:
    containers = [
        {"name": app, "image": image},
        *({"name": f"side{i}", "image": s} for i, s in enumerate(sidecars)),
    ]
    return {"metadata": {"name": f"slurm-{app}-0", "namespace": "slurm",
                         "labels": {"app.kubernetes.io/name": app}},
            "spec": {"containers": containers}}  # fmt: skip


def test_the_map_names_a_prefix_per_tag() -> None:
    hand = Path("/opt/slurm-hand")
    assert dict(TAGS) == {"25.11.7": hand / "25.11.7", "26.05.3": hand / "26.05.3"}
    assert parse_tags("") == {}
    assert parse_tags(" , ") == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("25.11.7", "is not TAG=PREFIX"),
        ("25.11.7=", "is not TAG=PREFIX"),
        ("=/opt/x", "is not TAG=PREFIX"),
        ("slurm:25.11.7=/opt/x", "maps a tag with ':' or '@'"),
        ("25.11.7=opt/x", "names a relative prefix"),
        ("25.11.7=/opt/x,25.11.7=/opt/y", "maps a tag twice"),
    ],
)
def test_a_malformed_map_names_the_entry_and_the_form(text: str, problem: str) -> None:
    with pytest.raises(LocalStackError) as raised:
        parse_tags(text)
    assert f"$SUNK_RECONCILER_SLURM_TAGS: '{text.split(',')[-1]}' {problem}" in str(raised.value)
    assert "SUNK_RECONCILER_SLURM_TAGS='25.11.7=/opt/slurm-hand/25.11.7," in str(raised.value)


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("ghcr.io/sunk-reconciler/slurm:25.11.7", "25.11.7"),
        ("localhost:5000/slurm:26.05.3", "26.05.3"),  # a registry's port is not a tag
        ("localhost:5000/slurm", None),
        ("registry/slurm:25.11.7@sha256:" + "a" * 64, "25.11.7"),
        ("registry/slurm@sha256:" + "a" * 64, None),
        ("slurm", None),
    ],
)
def test_the_tag_of_an_image(image: str, tag: str | None) -> None:
    assert image_tag(image) == tag


@pytest.mark.parametrize("app", ["slurmdbd", "slurmctld", "slurmd", "slurmrestd", "login"])
def test_a_slurm_pod_of_a_mapped_tag_runs_that_prefix(app: str) -> None:
    assert mapped_install(pod(app, "ghcr.io/sunk-reconciler/slurm:25.11.7"), TAGS) == Path(
        "/opt/slurm-hand/25.11.7"
    )


def test_a_pod_of_an_unmapped_tag_runs_the_stack_install() -> None:
    assert mapped_install(pod("slurmctld", "ghcr.io/sunk-reconciler/slurm:24.11.5"), TAGS) is None
    assert mapped_install(pod("slurmctld", "ghcr.io/sunk-reconciler/slurm:25.11.7"), {}) is None


def test_only_the_main_container_and_only_slurm_pods_choose() -> None:
    """A sidecar of the new tag (munge) moves nothing; MariaDB is not Slurm."""
    sidecar = pod("slurmctld", "ghcr.io/x/slurm:24.11.5", "ghcr.io/x/slurm:25.11.7")
    assert mapped_install(sidecar, TAGS) is None
    assert mapped_install(pod("mysql", "ghcr.io/x/mariadb:25.11.7"), TAGS) is None
    assert mapped_install({"metadata": {"name": "bare"}, "spec": {}}, TAGS) is None


def test_clients_follow_the_newest_slurmctld_pod_not_being_deleted() -> None:
    """Mid-rollout the old controller Pod is terminating and the new one runs the new tag:
    clients speak the new one's release; login Pods and deleted Pods choose nothing."""
    old = pod("slurmctld", "ghcr.io/x/slurm:24.11.5")
    old["metadata"] |= {"creationTimestamp": "2026-11-29T10:00:00Z",
                        "deletionTimestamp": "2026-11-29T11:00:00Z"}  # fmt: skip
    new = pod("slurmctld", "ghcr.io/x/slurm:25.11.7")
    new["metadata"]["creationTimestamp"] = "2026-11-29T11:00:01Z"
    login = pod("login", "ghcr.io/x/slurm:26.05.3")
    login["metadata"]["creationTimestamp"] = "2026-11-29T12:00:00Z"
    assert controller_pod([old, new, login]) is new
    assert controller_pod([old, login]) is None
    assert controller_pod([]) is None


def test_an_unmapped_tag_of_another_release_is_said_to_run_the_stack_release() -> None:
    note = unmapped_note(pod("slurmctld", "ghcr.io/x/slurm:25.11.8"), TAGS, "24.11.5")
    assert note == ("image tag 25.11.8 is not in $SUNK_RECONCILER_SLURM_TAGS (mapped: 25.11.7, "
                    "26.05.3): it runs the stack's Slurm 24.11.5")  # fmt: skip
    # The stack's own release, a site suffix of it, a mapped tag or no release: nothing to say.
    for tag in ("24.11.5", "24.11.5-site.3", "25.11.7", "latest"):
        assert unmapped_note(pod("slurmd", f"ghcr.io/x/slurm:{tag}"), TAGS, "24.11.5") is None
    assert unmapped_note(pod("mysql", "ghcr.io/x/mariadb:10.11"), TAGS, "24.11.5") is None


def test_without_a_map_a_stack_of_another_release_says_nothing_per_pod() -> None:
    """`local up --slurm-prefix` of 26.05.3 runs the fixture's Pods, which name 24.11.5, on
    26.05.3 as it always did: one warning per Pod start was noise there."""
    assert unmapped_note(pod("slurmctld", "ghcr.io/x/slurm:24.11.5"), {}, "26.05.3") is None


def test_a_tag_mapped_to_an_install_of_another_release_is_refused() -> None:
    prefix = Path("/opt/slurm-hand/26.05.3")
    assert tag_mismatch("25.11.7", prefix, "26.05.3") == (
        "$SUNK_RECONCILER_SLURM_TAGS maps tag 25.11.7 to /opt/slurm-hand/26.05.3, which holds "
        "Slurm 26.05.3"
    )
    assert tag_mismatch("26.05.3", prefix, "26.05.3") is None
    assert tag_mismatch("26.05.3-site.1", prefix, "26.05.3") is None
    assert tag_mismatch("26.05", prefix, "26.05.3") is None  # a series names every patch
    assert tag_mismatch("upgrade-test", prefix, "26.05.3") is None  # names no release


def test_each_mapped_prefix_is_read_and_a_tag_of_another_release_refused(
    tmp_path: Path,
) -> None:
    hand = fake_prefix(tmp_path / "25.11.7", "slurm 25.11.7")
    installs = installs_by_tag(f"25.11.7={hand}")
    assert installs["25.11.7"].version == "25.11.7"
    assert installs["25.11.7"].daemons["slurmctld"] == hand / "sbin" / "slurmctld"
    with pytest.raises(LocalStackError, match=rf"maps tag 26.05.3 to {hand}, which holds "
                                              r"Slurm 25.11.7"):  # fmt: skip
        installs_by_tag(f"26.05.3={hand}")
    with pytest.raises(LocalStackError, match=r"holds no Slurm"):
        installs_by_tag(f"26.05.3={tmp_path / 'nothing'}")


def test_a_mapped_install_runs_its_own_daemons_commands_and_libraries(tmp_path: Path) -> None:
    """What the node agent starts a Pod of a mapped tag with; the stack's own stay put."""
    stack = for_prefix(tmp_path / "24.11.5", SlurmRelease(24, 11, 5))
    other = for_prefix(tmp_path / "25.11.7", SlurmRelease(25, 11, 7))
    paths = SlurmPaths(tmp_path / "stack")
    ports = SlurmPorts(slurmctld=1, slurmd=2, slurmrestd=3, slurmdbd=4, mariadb=5)
    cluster = SlurmCluster(Supervisor(tmp_path / "pids", tmp_path / "logs"), paths, ports,
                           install=stack)  # fmt: skip
    assert cluster.daemon_dir() == cluster.daemon_dir(stack) == paths.bin
    daemons = cluster.daemon_dir(other)
    for name in ("slurmctld", "slurmd", "slurmstepd", "slurmdbd"):
        assert os.readlink(daemons / name) == str(tmp_path / "25.11.7" / "sbin" / name)
    assert cluster.accounting_daemons(other).bin_dir == daemons
    env = cluster.env(other)
    assert env["PATH"].split(":")[0] == str(tmp_path / "25.11.7" / "bin")
    assert env["LD_LIBRARY_PATH"] == str(tmp_path / "25.11.7" / "lib")
    assert env["SLURM_CONF"] == str(paths.slurm_conf)  # the one cluster's config
    assert cluster.env()["PATH"].split(":")[0] == str(tmp_path / "24.11.5" / "bin")
