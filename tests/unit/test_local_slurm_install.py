"""Which Slurm `local up` runs: the release read from `slurmctld -V`, an install by prefix
(`--slurm-prefix`, $SUNK_RECONCILER_SLURM_PREFIX) or by release name, and the errors that name
the fix. The stacks themselves run in tests/integration (test_local_up.py, with the prefix in
$SUNK_RECONCILER_SLURM_PREFIX for a hand-built Slurm)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.errors import LocalStackError
from reconciler.local.processes import Supervisor
from reconciler.local.slurm.cluster import SlurmCluster
from reconciler.local.slurm.install import (
    DEBIAN_2205,
    PREFIX_ENV,
    RELEASE_ENV,
    REST_USER,
    SLURM_2411_PREFIX,
    for_prefix,
    install_at,
    recorded_install,
    slurm_install,
)
from reconciler.local.slurm.prepare import check_binaries
from reconciler.local.slurm.site import SlurmPaths, SlurmPorts
from reconciler.slurm_release import SlurmRelease, release_in


@pytest.mark.parametrize(
    ("printed", "release"),
    [
        ("slurm 26.05.3\n", SlurmRelease(26, 5, 3)),
        ("slurm 25.11.7\n", SlurmRelease(25, 11, 7)),
        ("slurm-wlm 22.05.8\n", SlurmRelease(22, 5, 8)),  # Debian's build
        ("Slurm-24.11.5", SlurmRelease(24, 11, 5)),
        ("slurm 25.11.0-0rc1\n", SlurmRelease(25, 11, 0)),  # a release candidate
        ("26.05", SlurmRelease(26, 5, 0)),
    ],
)
def test_the_release_is_read_from_slurmctld_output(printed: str, release: SlurmRelease) -> None:
    assert release_in(printed) == release


def test_a_release_names_its_series_and_sorts_by_number() -> None:
    assert SlurmRelease(26, 5, 3).series == "26.05"
    assert str(SlurmRelease(25, 11, 7)) == "25.11.7"
    assert SlurmRelease(25, 11, 7) < SlurmRelease(26, 5, 0) < SlurmRelease(26, 5, 3)


def test_text_without_a_release_names_none() -> None:
    """read_release turns None into an error quoting what slurmctld printed."""
    assert release_in("slurmctld: error: x\n") is None


def test_an_install_by_prefix_runs_that_prefix_binaries_as_the_rest_user() -> None:
    install = for_prefix(Path("/opt/hand/26.05.3"), SlurmRelease(26, 5, 3))
    assert (install.release, install.version) == ("26.05", "26.05.3")
    assert install.daemons["slurmctld"] == Path("/opt/hand/26.05.3/sbin/slurmctld")
    assert install.slurmrestd == Path("/opt/hand/26.05.3/sbin/slurmrestd")
    assert (install.bin_dir, install.lib_dir) == (Path("/opt/hand/26.05.3/bin"),
                                                  Path("/opt/hand/26.05.3/lib"))  # fmt: skip
    # 25.11 and 26.05 refuse the name `nobody` ("Unable to resolve user: nobody").
    assert install.rest_identity == ("-u", REST_USER, "-g", REST_USER)
    assert "nobody" not in DEBIAN_2205.rest_identity
    assert install.rest_probe_version == "v0.0.42"  # served by 24.11 to 26.05
    assert install.env({"PATH": "/usr/bin"}) == {
        "PATH": "/opt/hand/26.05.3/bin:/usr/bin",
        "LD_LIBRARY_PATH": "/opt/hand/26.05.3/lib",
    }


def test_a_release_the_stack_does_not_know_is_refused_with_the_ones_it_does() -> None:
    with pytest.raises(LocalStackError, match=r"Slurm 26\.11 in /opt/x: the local stack "
                                              r"runs 23\.11, .*26\.05 from a prefix"):  # fmt: skip
        for_prefix(Path("/opt/x"), SlurmRelease(26, 11, 0))


def fake_prefix(root: Path, printed: str) -> Path:
    """A prefix whose sbin/slurmctld prints `printed` for -V, as a hand-built one does."""
    sbin = root / "sbin"
    sbin.mkdir(parents=True)
    script = sbin / "slurmctld"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -V ] && echo '{printed}'\n")
    script.chmod(0o755)
    return root


def test_the_prefix_release_comes_from_its_own_slurmctld(tmp_path: Path) -> None:
    install = install_at(fake_prefix(tmp_path / "p", "slurm 25.11.7"))
    assert (install.release, install.version, install.prefix) == (
        "25.11",
        "25.11.7",
        tmp_path / "p",
    )


def test_a_prefix_without_slurmctld_says_which_prefix_to_give(tmp_path: Path) -> None:
    with pytest.raises(LocalStackError) as raised:
        slurm_install(prefix=tmp_path)
    assert f"{tmp_path} holds no Slurm: no {tmp_path}/sbin/slurmctld" in str(raised.value)
    assert "configure flags of tools/setup.sh" in str(raised.value)


def test_a_prefix_missing_daemons_names_them_and_how_to_build(tmp_path: Path) -> None:
    install = install_at(fake_prefix(tmp_path / "p", "slurm 26.05.3"))
    with pytest.raises(LocalStackError) as raised:
        check_binaries(False, install)
    text = str(raised.value)
    assert text.startswith(f"missing Slurm 26.05 binaries: {tmp_path}/p/sbin/slurmrestd, ")
    assert f"build Slurm 26.05.3 into {tmp_path}/p with the configure flags" in text


def test_flags_win_over_the_environment_and_the_prefix_over_the_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hand = fake_prefix(tmp_path / "hand", "slurm 26.05.3")
    monkeypatch.setenv(PREFIX_ENV, str(hand))
    monkeypatch.delenv(RELEASE_ENV, raising=False)
    assert slurm_install().prefix == hand  # the suite's way
    assert slurm_install("22.05") is DEBIAN_2205  # --slurm 22.05
    assert slurm_install("24.11").prefix == SLURM_2411_PREFIX
    other = fake_prefix(tmp_path / "other", "slurm 25.11.7")
    assert slurm_install(prefix=other).version == "25.11.7"  # --slurm-prefix
    monkeypatch.delenv(PREFIX_ENV)
    monkeypatch.setenv(RELEASE_ENV, "22.05")
    assert slurm_install() is DEBIAN_2205


def test_both_variables_must_name_the_same_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hand = fake_prefix(tmp_path / "hand", "slurm 26.05.3")
    monkeypatch.setenv(PREFIX_ENV, str(hand))
    monkeypatch.setenv(RELEASE_ENV, "26.05")
    assert slurm_install().version == "26.05.3"
    monkeypatch.setenv(RELEASE_ENV, "22.05")
    with pytest.raises(LocalStackError, match=rf"\$SUNK_RECONCILER_SLURM=22.05 but "
                                              rf"\$SUNK_RECONCILER_SLURM_PREFIX={hand} holds "
                                              r"Slurm 26.05.3"):  # fmt: skip
        slurm_install()


def test_the_stack_record_finds_the_install_again_without_running_it() -> None:
    hand = for_prefix(Path("/opt/hand/25.11.7"), SlurmRelease(25, 11, 7))
    record = hand.to_record()
    assert record == {"release": "25.11", "version": "25.11.7", "prefix": "/opt/hand/25.11.7"}
    assert recorded_install(record) == hand  # /opt/hand does not exist: nothing ran
    assert recorded_install(slurm_install("24.11").to_record()).prefix == SLURM_2411_PREFIX
    assert recorded_install({}) is DEBIAN_2205  # recorded before releases were chosen


def test_local_up_takes_a_release_or_a_prefix_not_both(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "local", "up", "--slurm", "24.11",
         "--slurm-prefix", str(tmp_path), "--runtime-dir", str(tmp_path / "rt")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--slurm-prefix: not allowed with argument --slurm" in done.stderr


def test_local_up_kubelet_refuses_a_slurm_prefix(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "local", "up", "--kubelet",
         "--slurm-prefix", str(tmp_path), "--runtime-dir", str(tmp_path / "rt")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "--directory, --slurm and --slurm-prefix do not apply" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_stack_runs_its_own_release_whatever_another_stack_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`local up --slurm 22.05` from a shell holding a 24.11 stack's exports (its bin first on
    PATH, its libraries, its SLURM_CONF): the daemons, `scontrol ping` and the stack's client
    commands get 22.05's commands and this stack's slurm.conf. With 24.11's scontrol the
    readiness ping spoke protocol 10752 (24.11's) to a 22.05 slurmctld, which refused it
    ("Invalid Protocol Version 10752"), and the stack never became ready."""
    other = tmp_path / "slurm" / "24.11.5"
    for program in ("bin/scontrol", "bin/sinfo", "sbin/slurmctld"):
        (other / program).parent.mkdir(parents=True, exist_ok=True)
        (other / program).write_text("#!/bin/sh\necho slurm 24.11.5\n")
        (other / program).chmod(0o755)
    (other / "lib").mkdir()
    monkeypatch.setenv("PATH", f"{other / 'bin'}:/usr/local/bin:/usr/bin:/bin")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(other / "lib"))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "other-stack" / "slurm.conf"))
    paths = SlurmPaths(tmp_path / "stack")
    ports = SlurmPorts(slurmctld=1, slurmd=2, slurmrestd=3, slurmdbd=4, mariadb=5)
    supervisor = Supervisor(tmp_path / "pids", tmp_path / "logs")
    env = SlurmCluster(supervisor, paths, ports, install=DEBIAN_2205).env()
    assert env["SLURM_CONF"] == str(paths.slurm_conf)
    for program in ("scontrol", "sinfo"):
        found = shutil.which(program, path=env["PATH"])
        assert found is None or not found.startswith(str(other)), (program, env["PATH"])
    assert str(other) not in env.get("LD_LIBRARY_PATH", ""), env.get("LD_LIBRARY_PATH")
    assert "/usr/local/bin" in env["PATH"].split(":")  # the rest of the caller's PATH stays
    # A stack of a prefix: its own commands first, never another release's.
    mine = for_prefix(tmp_path / "slurm" / "26.05.3", SlurmRelease(26, 5, 3))
    env = SlurmCluster(supervisor, paths, ports, install=mine).env()
    assert env["PATH"].split(":")[0] == str(mine.bin_dir)
    assert str(other) not in env["PATH"]
