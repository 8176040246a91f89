"""A container's own view of /etc and of the directory service's files, for a daemon the local
stack runs on this host: a private mount namespace (unshare), an overlay on /etc whose writes
land in the Pod's folder, and the container's mounts bound where the container sees them.

This is how the login Pod's sshd, sudo and Slurm's daemons read users from LDAP through the
stack's sssd (libnss_sss, /etc/nsswitch.conf with `sss`, /etc/sudoers.d) while the host's own
/etc/nsswitch.conf, /etc/sssd and /var/lib/sss stay as they are. The prefix keeps the PID: sh
execs the daemon, so the Supervisor's pidfile names the daemon itself.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

UNSHARE = "unshare"


@dataclass(frozen=True)
class ContainerView:
    """What one daemon sees: `binds` (host path -> container path), tmpfs folders, and where
    the overlay on /etc keeps its writes."""

    overlay: Path
    binds: Sequence[tuple[Path, PurePosixPath]] = ()
    tmpfs: Sequence[PurePosixPath] = field(default=())

    def prefix(self) -> list[str]:
        """argv to put before the daemon's own."""
        return [UNSHARE, "--mount", "--propagation", "private", "--", "sh", "-c",
                self.script(), "pod-view"]  # fmt: skip

    def script(self) -> str:
        upper, work = self.overlay / "upper", self.overlay / "work"
        lines = ["set -e", f"mkdir -p {_q(upper)} {_q(work)}",
                 f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} "
                 "/etc"]  # fmt: skip
        for path in self.tmpfs:
            lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {_q(path)}")
        # Parents first: a bind inside another bind must come after it.
        for source, target in sorted(self.binds, key=lambda b: len(b[1].parts)):
            make = "mkdir -p" if source.is_dir() else "touch"
            lines.append(f"[ -e {_q(target)} ] || {make} {_q(target)}")
            lines.append(f"mount --bind {_q(source)} {_q(target)}")
        lines.append('exec "$@"')
        return "\n".join(lines)


def _q(path: Path | PurePosixPath) -> str:
    return shlex.quote(str(path))
