"""What slurmrestd v0.0.38 cannot do, through the `scontrol` binary with auth/jwt.

Node drain/resume/state, reservation create/update/delete, reconfigure. The token
travels in the child's environment (SLURM_JWT; the cluster needs AuthAltTypes=auth/jwt), never on
its command line, so it is not visible in `ps` nor in any error text built from the argv.

The arguments are checked and built in scontrol_args.py (its docstring gives the policy: reject,
never quote); this module runs the binary and reads what it answers.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from reconciler.adapters.client_env import EnvSource, child_env, current_env, find_program
from reconciler.adapters.scontrol_args import (
    NodeState,
    OptionValue,
    node_state_args,
    node_weight_args,
    reservation_args,
)
from reconciler.adapters.slurm.jwt import TokenSource
from reconciler.errors import ScontrolError, ScontrolTimeoutError
from reconciler.slurm_release import SlurmRelease, release_in

DEFAULT_TIMEOUT_SECONDS = 30.0


def error_summary(stderr: str, stdout: str = "") -> str:
    """The meaningful lines of scontrol's output, without the "No error"/"Request aborted" noise."""
    lines = []
    for line in (stderr + "\n" + stdout).splitlines():
        line = line.strip().removeprefix("scontrol: error: ").strip()
        if line and not line.endswith(": No error") and line != "Request aborted":
            lines.append(line)
    return "; ".join(lines) or "no message"


# What scontrol prints when slurmctld drops a request whose JWT it rejects (22.05, 24.11).
_AUTH_SYMPTOMS = ("Zero Bytes were transmitted or received", "Protocol authentication error")
_AUTH_HINT = "slurmctld answers an expired or foreign JWT this way: check the key and user"
_MISSING = {"reservation": "Requested reservation is invalid"}


class Scontrol:
    """Runs scontrol against one cluster as the token's user."""

    def __init__(
        self,
        tokens: TokenSource,
        *,
        env: EnvSource,
        binary: str = "scontrol",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self._tokens = tokens
        self._env = env if callable(env) else dict(env)
        self._binary = binary
        self._timeout = timeout
        self._releases: dict[str, SlurmRelease | None] = {}

    def drain_node(self, nodes: str, reason: str) -> None:
        """DRAIN: running jobs finish, nothing new starts. The reason is kept verbatim."""
        self.run(node_state_args(nodes, NodeState.DRAIN, reason))

    def resume_node(self, nodes: str) -> None:
        self.run(node_state_args(nodes, NodeState.RESUME))

    def set_node_state(self, nodes: str, state: NodeState, reason: str | None = None) -> None:
        self.run(node_state_args(nodes, state, reason))

    def set_node_weight(self, nodes: str, weight: int) -> None:
        """Slurm allocates the lowest-weight nodes that fit first (before LLN or node order)."""
        self.run(node_weight_args(nodes, weight))

    def create_reservation(self, name: str, options: Mapping[str, OptionValue]) -> None:
        """StartTime/EndTime may be seconds since the epoch (ints); Users/Accounts lists."""
        self.run(["create", "reservation", *reservation_args("create", name, options)[1:]])

    def update_reservation(self, name: str, options: Mapping[str, OptionValue]) -> None:
        """`Flags` adds, `Flags-` removes; an empty Users/Accounts list clears it."""
        self.run(reservation_args("update", name, options))

    def delete_reservation(self, name: str, *, missing_ok: bool = False) -> bool:
        """Slurm refuses while jobs run in it ("Requested reservation is in use")."""
        return self._delete("reservation", reservation_args("delete", name, {}), missing_ok)

    def reconfigure(self) -> None:
        """slurmctld re-reads slurm.conf; partitions made with scontrol do not survive it."""
        self.run(["reconfigure"])

    def run(self, args: Sequence[str]) -> str:
        """scontrol with already validated args; stdout on success, ScontrolError otherwise."""
        caller = current_env(self._env)
        command = [self._resolve_binary(caller), *args]
        env = child_env(os.environ, caller, self._tokens.token())
        try:
            done = subprocess.run(
                command,
                env=env,
                capture_output=True,
                text=True,
                timeout=self._timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ScontrolTimeoutError(
                list(args),
                exit_code=None,
                message=f"no answer within {self._timeout:g} s",
                hint="is slurmctld up? (scontrol ping)",
            ) from None
        if done.returncode != 0:
            summary = error_summary(done.stderr, done.stdout)
            hint = _AUTH_HINT if any(s in summary for s in _AUTH_SYMPTOMS) else None
            raise ScontrolError(list(args), exit_code=done.returncode, message=summary, hint=hint)
        return done.stdout

    def slurmctld_release(self) -> str | None:
        """The release slurmctld runs: SLURM_VERSION in `scontrol show config` (slurmctld's
        own; slurmrestd's answers carry slurmrestd's release)."""
        return config_value(self.run(["show", "config"]), "SLURM_VERSION")

    def client_release(self) -> SlurmRelease | None:
        """The release of this scontrol itself (`scontrol -V`); None where it is not
        installed. Asked once per binary, with a slurm.conf of two lines: `-V` parses one
        first, and the cluster's may be one this scontrol cannot read (the case to find)."""
        caller = current_env(self._env)
        try:
            binary = self._resolve_binary(caller)
        except ScontrolError:
            return None
        if binary not in self._releases:
            with tempfile.TemporaryDirectory(prefix="scontrol-version-") as scratch:
                conf = Path(scratch) / "slurm.conf"
                conf.write_text("ClusterName=version\nSlurmctldHost=localhost\n")
                env = child_env(os.environ, {**caller, "SLURM_CONF": str(conf)}, None)
                done = subprocess.run(
                    [binary, "-V"], env=env, capture_output=True, text=True, timeout=10,
                    stdin=subprocess.DEVNULL, check=False,
                )  # fmt: skip
            self._releases[binary] = release_in(done.stdout) if done.returncode == 0 else None
        return self._releases[binary]

    def node_versions(self) -> dict[str, str | None]:
        """Each node slurmctld knows -> the release its slurmd registered with, None where
        slurmd does not respond (DOWN, NOT_RESPONDING, powered down) or never registered
        (FUTURE nodes are left out: they are declared, not there)."""
        return node_versions(self.run(["show", "node", "-o"]))

    def _delete(self, kind: str, args: list[str], missing_ok: bool) -> bool:
        try:
            self.run(args)
        except ScontrolError as error:
            if missing_ok and _MISSING[kind] in error.output:
                return False
            raise
        return True

    def _resolve_binary(self, caller: Mapping[str, str]) -> str:
        found = find_program(self._binary, caller)
        if found is None:
            raise ScontrolError(
                [],
                exit_code=None,
                message=f"{self._binary!r} not found on PATH",
                hint="install slurm-client",
            )
        return found

    def __repr__(self) -> str:
        return f"Scontrol(user={self._tokens.user!r}, binary={self._binary!r})"


def config_value(text: str, key: str) -> str | None:
    """ "KEY = value" in `scontrol show config` or `sacctmgr show configuration`."""
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip() or None
    return None


_SILENT = ("DOWN", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP")


def node_versions(text: str) -> dict[str, str | None]:
    """`scontrol show node -o` (one node a line, "Key=value" words) -> node -> its slurmd's
    release, or None where it does not respond."""
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        name, state = words.get("NodeName"), words.get("State", "")
        if not name or state.startswith("FUTURE"):
            continue
        version = words.get("Version")
        silent = any(flag in state.split("+") for flag in _SILENT) or version in (None, "(null)")
        found[name] = None if silent else version
    return found
