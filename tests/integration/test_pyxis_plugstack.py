"""compute.pyxis's plugstack.conf read by the real Slurm (the local 24.11 build, or 22.05).

No registry this project can reach has pyxis (or enroot), so the plugin itself cannot be loaded
here; what can be shown is that Slurm reads the file we render where it looks for it (beside
slurm.conf, as the slurm-conf ConfigMap lays both out): with `required`, the real `srun --help`
fails naming exactly our plugin path; with `optional`, srun says it could not load it and runs.
No stand-in plugin is built: docs/compute-services.md says what stays untested.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.local.agent.volumes import HostLayout, Materializer, pod_mounts
from reconciler.local.slurm.install import slurm_install
from reconciler.slurm_release import maybe_release
from tests.integration.conftest import require_slurm_binaries

FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config-repo"
PLUGIN = "/opt/pyxis-absent/spank_pyxis.so"  # where no plugin is, on this machine


def _slurm_conf_dir(tmp_path: Path, pyxis: str) -> Path:
    """The fixture repo with `pyxis`, compiled, and its slurm-conf ConfigMap laid out as the
    slurmd Pod mounts it at /etc/slurm; that folder."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "values.d" / "50-pyxis.yaml").write_text(f"compute:\n  pyxis: {pyxis}\n")
    state = compile_desired_state(load_config(read_repo(repo), read_library()))
    objects = {(o["kind"], o["metadata"]["name"]): o for o in state.kube_objects}
    template = objects[("StatefulSet", "slurm-cpu")]["spec"]["template"]
    pod = {"metadata": {"name": "slurm-cpu-0", "namespace": "slurm"}, "spec": template["spec"]}
    files = Materializer(HostLayout({}, tmp_path / "pods"),
                         lambda kind, _ns, name: objects.get((kind, name)))  # fmt: skip
    conf = next(m for m in pod_mounts(pod, ["slurmd"]) if str(m.path) == "/etc/slurm")
    files.mount(pod, conf)
    return files.host_path(pod, conf.path)


def _srun_help(conf_dir: Path) -> subprocess.CompletedProcess[str]:
    install = slurm_install()
    srun = install.command("srun")
    if srun is None:
        pytest.fail(f"no srun for Slurm {install.release}: run tools/setup.sh")
    env = install.env({**os.environ, "SLURM_CONF": str(conf_dir / "slurm.conf")})
    return subprocess.run([srun, "--help"], capture_output=True, text=True, env=env,
                          timeout=30, check=False)  # fmt: skip


@pytest.fixture(autouse=True)
def _slurm_installed() -> None:
    require_slurm_binaries()


def test_required_pyxis_missing_stops_srun_naming_our_plugin(tmp_path: Path) -> None:
    conf_dir = _slurm_conf_dir(tmp_path, f"{{enabled: true, pluginPath: {PLUGIN}}}")
    assert (conf_dir / "plugstack.conf").is_file()
    done = _srun_help(conf_dir)
    assert done.returncode != 0, done.stdout[:200]
    assert f"{conf_dir / 'plugstack.conf'}:2: Failed to load plugin {PLUGIN}" in done.stderr, (
        done.stderr
    )


def test_optional_pyxis_missing_lets_srun_run(tmp_path: Path) -> None:
    conf_dir = _slurm_conf_dir(
        tmp_path, f"{{enabled: true, required: false, pluginPath: {PLUGIN}}}"
    )
    done = _srun_help(conf_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: srun")
    release = maybe_release(slurm_install().version)
    if release is not None and not release.at_least(25, 11):  # 25.11 on: srun says nothing
        assert f"spank: {PLUGIN}: Dlopen of plugin file failed" in done.stderr  # it did try


def test_without_pyxis_there_is_no_plugstack_and_srun_says_nothing_of_it(tmp_path: Path) -> None:
    conf_dir = _slurm_conf_dir(tmp_path, "{enabled: false}")
    assert not (conf_dir / "plugstack.conf").exists()
    done = _srun_help(conf_dir)
    assert done.returncode == 0 and "spank" not in done.stderr, done.stderr
