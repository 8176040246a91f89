"""Slurm REST clients per Slurm user: a placeholder job runs as the user the Pod names.

slurmrestd 22.05 (v0.0.38) refuses `user_id`/`group_id` in a submit: a job runs as its token's
user. So a Pod with `sunk.coreweave.com/user-id: 1001` needs a token whose user is 1001;
slurmctld takes a numeric user name as that uid. That needs the JWT key (minted tokens); with a
provided token only the operator's own user is possible.
"""

from __future__ import annotations

import threading
from pathlib import Path

from reconciler.adapters.scontrol import Scontrol
from reconciler.adapters.slurm_jwt import MintedTokens, TokenSource
from reconciler.adapters.slurm_rest import SlurmObserver, SlurmRestApi, connect
from reconciler.errors import SlurmAuthError


class SlurmClients:
    """`observe`, when set (at any time), is told of every request of every client here.
    `scontrol`, when given, sets node weights for bin-packing (REST 0.0.38 cannot)."""

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
        self.operator: SlurmRestApi = connect(url, operator, observe=self._relay)
        self._operator_user = operator.user
        self._by_user: dict[str, SlurmRestApi] = {}
        self._lock = threading.Lock()

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
                client = self._by_user[user] = connect(self._url, tokens, observe=self._relay)
            return client

    def _relay(self, operation: str, seconds: float, ok: bool) -> None:
        observe = self.observe
        if observe is not None:
            observe(operation, seconds, ok)

    def close(self) -> None:
        with self._lock:
            for client in self._by_user.values():
                client.close()
            self._by_user.clear()
        self.operator.close()
