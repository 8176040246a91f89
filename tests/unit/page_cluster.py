"""The widest cluster the tests render: fixtures/config-repo (accounting and login on) with the
examples of SUNK's "Slurm Workload Manager" page layered over it as a values.d file, so every kind
of Pod we render is in it (slurmctld, slurmrestd, slurmdbd, MariaDB, login, slurmd with pyxis, ssh,
s6 and the sssd sidecar). Commands run as a user runs them, on a copy of that repo."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.unit.test_directory import GOOGLE
from tests.unit.test_page_layering import SHORT_FORM
from tests.unit.test_pyxis import SEED as PYXIS
from tests.unit.test_s6_services import PAGE_S6

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"

# The examples of SUNK's "Slurm Workload Manager" page as the other tests use them, one values.d
# file each, merged over the fixture's values in this order by the layering rules.
SLURM_PAGE_CONTROL_PLANE = """\
controller:
  image: {repository: example/slurm, tag: "24.11"}
  securityContext: {runAsUser: 1000, runAsGroup: 1001}
  terminationGracePeriodSeconds: 45
  priorityClassName: high
  stateVolume: {size: 5Gi, storageClassName: fast}
nodeSelector: {region: LAS1}
login:
  replicas: 2
  image: {repository: custom-controller, tag: 1.0.0}
  terminationGracePeriodSeconds: 5
  service:
    type: LoadBalancer
    externalTrafficPolicy: Cluster
    annotations: {lb.example/ip: public}
compute:
  ssh:
    enabled: true
  securityContext:
    capabilities:
      add: [SYS_NICE, SYS_ADMIN]
  mounts:
    - name: /mnt/home
      pvc: home-dir
  nodes:
    rtx4000-cu117:
      # SUNK's custom image, named for its CUDA layer (the fixture's site policy)
      image: {repository: custom-slurmd-cu117, tag: 1.0.0}
"""
SLURM_PAGE_EXAMPLES = {
    "90-directory.yaml": GOOGLE,
    "91-pyxis.yaml": PYXIS,
    "92-s6.yaml": PAGE_S6,
    "93-short-form.yaml": SHORT_FORM,
    "94-control-plane.yaml": SLURM_PAGE_CONTROL_PLANE,
}


def page_repo(root: Path) -> Path:
    """A copy of the fixture repo at root/repo with the examples of SUNK's "Slurm Workload Manager"
    page layered on."""
    repo = root / "repo"
    shutil.copytree(FIXTURE, repo)
    for name, text in SLURM_PAGE_EXAMPLES.items():
        (repo / "values.d" / name).write_text(textwrap.dedent(text))
    return repo


def reconciler(*args: str) -> str:
    """stdout of `reconciler ARGS`, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
