"""A client command whose environment is read per command runs the install named at that
moment: a local stack mid-upgrade moves slurmctld to another install between two commands."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.sacctmgr import Sacctmgr
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.jwt import MintedTokens


def _install(root: Path, release: str) -> Path:
    """A bin directory whose scontrol and sacctmgr say which release they are."""
    bin_dir = root / release / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("scontrol", "sacctmgr"):
        program = bin_dir / name
        program.write_text(f'#!/bin/sh\necho "{release} $SLURM_CONF $*"\n')
        program.chmod(0o755)
    return bin_dir


def _tokens(tmp_path: Path) -> MintedTokens:
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    return MintedTokens(key, "slurm")


def test_each_command_runs_the_install_named_when_it_runs(tmp_path: Path) -> None:
    old, new = _install(tmp_path, "24.11.5"), _install(tmp_path, "25.11.7")
    now = {"PATH": str(old), "SLURM_CONF": "/run/a/slurm.conf"}
    scontrol = Scontrol(_tokens(tmp_path), env=lambda: dict(now))
    sacctmgr = Sacctmgr(env=lambda: dict(now))
    assert scontrol.run(["show", "config"]) == "24.11.5 /run/a/slurm.conf show config\n"
    now["PATH"] = str(new)
    assert scontrol.run(["show", "config"]) == "25.11.7 /run/a/slurm.conf show config\n"
    assert sacctmgr.run(["show", "configuration"]).startswith("25.11.7 ")


def test_a_fixed_environment_is_kept(tmp_path: Path) -> None:
    old = _install(tmp_path, "24.11.5")
    fixed = {"PATH": str(old), "SLURM_CONF": "/run/a/slurm.conf"}
    scontrol = Scontrol(_tokens(tmp_path), env=fixed)
    fixed["PATH"] = "/nowhere"
    assert scontrol.run(["ping"]).startswith("24.11.5 ")


def test_the_client_release_is_the_binarys_own(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "scontrol"
    # As Slurm's: -V reads a slurm.conf first, and fails where it cannot.
    program.write_text(
        '#!/bin/sh\n[ -s "$SLURM_CONF" ] || exit 1\n[ "$1" = -V ] && echo "slurm 24.11.5"\n'
    )
    program.chmod(0o755)
    tokens = _tokens(tmp_path)
    assert str(Scontrol(tokens, env={"PATH": str(bin_dir)}).client_release()) == "24.11.5"
    assert Scontrol(tokens, env={"PATH": str(tmp_path / "none")}).client_release() is None
