"""A Slurm cluster from the slurm image alone: slurmctld (as slurm) and a slurmd (as root),
each with the munge sidecar the render gives it, in one network namespace the test makes; a
job submitted with srun as the slurm user runs in the slurmd container.

Run the way test_images.py runs the image (image_chroot.py, pod_parts.py). The configuration is
the smallest that runs here (no cgroups: proctrack/linuxproc, task/none); the render's own
slurm.conf runs on real kubelets (test_in_cluster.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.local.ports import free_ports
from tests.integration import image, image_chroot
from tests.integration.image_chroot import Exported
from tests.integration.pod_parts import SLURM_UID, empty_dir, etc_hosts, munged, ok, wait_for

pytestmark = pytest.mark.image

NODE = "images-node-0"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory, figures: dict[str, str]) -> Iterator[Exported]:
    yield from image_chroot.built_and_exported(image.build_slurm, tmp_path_factory, figures)


def slurm_conf(parent: Path) -> Path:
    ctld_port, slurmd_port = free_ports(2)
    etc = parent / "etc-slurm"
    etc.mkdir()
    (etc / "slurm.conf").write_text(
        f"ClusterName=images\nSlurmctldHost=localhost\nSlurmctldPort={ctld_port}\n"
        f"SlurmdPort={slurmd_port}\nSlurmUser=slurm\nAuthType=auth/munge\n"
        "StateSaveLocation=/var/spool/slurmctld\nSlurmdSpoolDir=/var/spool/slurmd\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nReturnToService=2\n"
        "SlurmdParameters=config_overrides\nSchedulerParameters=sched_interval=1\n"
        f"NodeName={NODE} NodeHostname={NODE} NodeAddr=127.0.0.1 CPUs=1 RealMemory=100\n"
        "PartitionName=all Nodes=ALL Default=YES State=UP\n"
    )
    return etc


def test_srun_runs_a_job_in_the_slurmd_container(slurm: Exported, tmp_path: Path) -> None:
    etc = slurm_conf(tmp_path)
    with (
        image_chroot.pod_network(f"sunk-cluster-{os.getpid()}") as netns,
        munged(slurm, tmp_path) as socket_dir,
    ):
        pod = {"binds": {etc: "/etc/slurm", etc_hosts(tmp_path, NODE): "/etc/hosts"},
               "netns": netns}  # fmt: skip
        ctld_log, slurmd_log = tmp_path / "slurmctld.log", tmp_path / "slurmd.log"
        slurmctld = slurm.start(
            ctld_log, "slurmctld", "-D", user=SLURM_UID, **pod,
            volumes={"/run/munge": socket_dir,
                     "/var/spool/slurmctld": empty_dir(tmp_path, "slurmctld-state")},
        )  # fmt: skip
        slurmd = slurm.start(
            slurmd_log, "slurmd", "-D", "-N", NODE, hostname=NODE, **pod,
            volumes={"/run/munge": socket_dir,
                     "/var/spool/slurmd": empty_dir(tmp_path, "slurmd-spool")},
        )  # fmt: skip
        client = {**pod, "user": SLURM_UID, "volumes": {"/run/munge": socket_dir}}
        try:

            def idle() -> bool:
                done = slurm.run("sinfo", "-h", "-N", "-o", "%N %t", **client)
                assert slurmd.poll() is None, slurmd_log.read_text()
                return done.stdout.split() == [NODE, "idle"]

            wait_for(idle, slurmctld, ctld_log, 60)
            job = ok(slurm.run("srun", "-N1", "sh", "-c", 'echo "$(id -un) on $(hostname)"',
                               timeout=120, **client))  # fmt: skip
            assert job.strip().splitlines()[-1] == f"slurm on {NODE}"
        finally:
            image_chroot.stop_in_chroot(slurmd, grace=20)
            image_chroot.stop_in_chroot(slurmctld, grace=20)
