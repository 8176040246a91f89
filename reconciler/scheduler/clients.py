"""Slurm REST clients per Slurm user: a placeholder job runs as the user the Pod names.

slurmrestd v0.0.40+ (Slurm 23.11+) takes `user_id`/`group_id` in a submit from an operator, so
the operator's client submits every job. slurmrestd 22.05 (v0.0.38) refuses them ("Disabled
key"): a job runs as its token's user, so a Pod with `sunk.coreweave.com/user-id: 1001` needs a
token whose user is 1001 (slurmctld takes a numeric user name as that uid). That needs the JWT
key (minted tokens); with a provided token only the operator's own user is possible.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

from reconciler.adapters.node_control import NodeControl
from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens, TokenSource
from reconciler.adapters.slurm.model import CAN_SUBMIT_AS_USER, JobSpec, SlurmRestApi, SubmittedJob
from reconciler.adapters.slurm.transport import SlurmObserver
from reconciler.errors import SlurmAuthError
from reconciler.slurm_release import maybe_release

OLDEST_RELEASE = (22, 5)


class SlurmClients:
    """`observe`, when set (at any time), is told of every request of every client here.
    `nodes` sets node weights for bin-packing: over REST (v0.0.40+) or with `scontrol`."""

    def __init__(
        self,
        url: str,
        operator: TokenSource,
        *,
        jwt_key: Path | None,
        observe: SlurmObserver | None = None,
        scontrol: Scontrol | None = None,
    ) -> None:
        self._url = url
        self.scontrol = scontrol
        self._key = jwt_key
        self.observe = observe
        self.requests: Counter[str] = Counter()  # slurmrestd requests made, by operation
        self._lock = threading.Lock()
        self.operator: SlurmRestApi = connect(url, operator, observe=self._relay)
        self.nodes = NodeControl(self.operator, scontrol)
        self._operator_user = operator.user
        self._by_user: dict[str, SlurmRestApi] = {}
        self._release: tuple[int, int] | None = None

    @property
    def release(self) -> tuple[int, int]:
        """The (major, minor) Slurm release slurmctld runs, asked once: admission refuses what
        it cannot do (exclusive: topo before 24.11)."""
        if self._release is None:
            self._release = parse_release(self.operator.slurm_version)
        return self._release

    @property
    def operator_user(self) -> str:
        """The Slurm user of the operator's token."""
        return self._operator_user

    @property
    def submits_as_user(self) -> bool:
        """The operator submits jobs that run as another user (with their group and priority)."""
        return CAN_SUBMIT_AS_USER in self.operator.capabilities

    def submit(
        self, spec: JobSpec, *, user_id: int | None, group_id: int | None, priority: int | None
    ) -> SubmittedJob:
        """Submit `spec` to run as `user_id` (None: the operator) in `group_id` (None: the
        user's id, as SUNK does), where the server can; otherwise with a token of that user,
        whose primary group Slurm then uses and whose `priority` the caller sets afterwards."""
        if user_id is None:
            return self.operator.submit(spec)
        if self.submits_as_user:
            group = user_id if group_id is None else group_id
            spec = replace(spec, user_id=user_id, group_id=group, priority=priority)
            return self.operator.submit(spec)
        return self.for_user(str(user_id)).submit(spec)

    def for_user(self, user: str) -> SlurmRestApi:
        if user == self._operator_user:
            return self.operator
        with self._lock:
            client = self._by_user.get(user)
            if client is None:
                if self._key is None:
                    raise SlurmAuthError(
                        f"cannot submit as Slurm user {user!r} with a fixed token for "
                        f"{self._operator_user!r}",
                        endpoint="jwt",
                        hint="give the scheduler the JWT key (--slurm-jwt-key) so it can mint "
                        "tokens for the users Pods name in sunk.coreweave.com/user-id",
                    )
                tokens = MintedTokens(self._key, user)
                client = connect(
                    self._url, tokens, api_version=self.operator.api_version, observe=self._relay
                )
                self._by_user[user] = client
            return client

    def _relay(self, operation: str, seconds: float, ok: bool) -> None:
        with self._lock:
            self.requests[operation] += 1
        observe = self.observe
        if observe is not None:
            observe(operation, seconds, ok)

    def close(self) -> None:
        with self._lock:
            for client in self._by_user.values():
                client.close()
            self._by_user.clear()
        self.operator.close()


def parse_release(text: str) -> tuple[int, int]:
    """ "24.11.5" -> (24, 11); anything unreadable counts as the oldest release we speak."""
    release = maybe_release(text)
    return (release.major, release.minor) if release else OLDEST_RELEASE
