"""The Containerfile, built and run: the image a user deploys does what the host install does.

Built FROM Debian 12 made by debootstrap (no registry), exported, and run under chroot as the
image's user on a read-only root with a tmpfs /tmp, as deploy/base runs it. Its Slurm client
commands talk to the session's real slurmctld 24.11 with a JWT, as the daemon's do.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from reconciler.adapters.slurm.jwt import MintedTokens
from tests.integration import image, image_chroot
from tests.integration.endpoints import SlurmEndpoints
from tests.integration.image_chroot import Exported

FIXTURE_REPO = image.ROOT / "fixtures" / "config-repo"
POLICIES = image.ROOT / "policies"

pytestmark = pytest.mark.image


@pytest.fixture(scope="module")
def unpacked(
    tmp_path_factory: pytest.TempPathFactory, figures: dict[str, str]
) -> Iterator[Exported]:
    yield from image_chroot.built_and_exported(image.build, tmp_path_factory, figures)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    shown = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, shown
    return done.stdout


def test_the_image_runs_as_the_deployments_user_with_the_reconciler_on_path(
    unpacked: Exported,
) -> None:
    deployment = yaml.safe_load((image.ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]["securityContext"]
    assert unpacked.config.user == f"{pod['runAsUser']}:{pod['runAsGroup']}"
    assert unpacked.config.entrypoint == ["reconciler"]
    version = image.image_tag().rsplit(":", 1)[1]
    assert ok(unpacked.run("--version")).strip() == f"reconciler {version}"
    assert ok(unpacked.run("id", "-u", entrypoint=False)).strip() == str(pod["runAsUser"])


def test_render_in_the_image_is_byte_identical_to_the_hosts(unpacked: Exported) -> None:
    host = subprocess.run(
        [str(image.ROOT / ".venv" / "bin" / "reconciler"), "render", str(FIXTURE_REPO)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    repo = {FIXTURE_REPO: "/tmp/config-repo"}
    inside = ok(unpacked.run("render", "/tmp/config-repo", binds=repo))
    assert inside == host.stdout
    assert "kind: StatefulSet" in inside


def test_the_shipped_policies_pass_their_tests_in_the_image(unpacked: Exported) -> None:
    out = ok(unpacked.run("policy", "test", "/tmp/policies", binds={POLICIES: "/tmp/policies"}))
    assert re.search(r"^[1-9]\d* passed, 0 failed ", out, re.M), out


def test_every_slurm_binary_and_plugin_finds_its_libraries(unpacked: Exported) -> None:
    listing = ok(unpacked.run(
        "sh", "-c", "for f in /opt/slurm/bin/* /opt/slurm/lib/*.so /opt/slurm/lib/slurm/*.so; "
        "do echo \"== $f\"; ldd \"$f\"; done", entrypoint=False,
    ))  # fmt: skip
    missing = [line for line in listing.splitlines() if "not found" in line]
    assert not missing
    for client in ("scontrol", "sacctmgr", "squeue", "sinfo", "scancel", "sbatch"):
        assert f"== /opt/slurm/bin/{client}\n" in listing


def test_the_images_slurm_clients_drive_the_real_slurmctld_with_a_jwt(
    unpacked: Exported, slurm: SlurmEndpoints
) -> None:
    conf_dir = slurm.slurm_conf.parent
    env = {
        "SLURM_CONF": f"/tmp/slurm/{slurm.slurm_conf.name}",
        "SLURM_JWT": MintedTokens(slurm.jwt_key, slurm.user).token(),
    }
    binds = {conf_dir: "/tmp/slurm"}
    version = ok(unpacked.run("scontrol", "--version", env=env, binds=binds, entrypoint=False))
    assert version.strip() == "slurm 24.11.5"
    nodes = ok(unpacked.run("sinfo", "--noheader", "--Node", "--format=%N",
                            env=env, binds=binds, entrypoint=False))  # fmt: skip
    assert set(slurm.node_names) <= set(nodes.split())
    partition = ok(unpacked.run("scontrol", "--oneliner", "show", "partition", slurm.partition,
                                env=env, binds=binds, entrypoint=False))  # fmt: skip
    assert f"PartitionName={slurm.partition} " in partition
