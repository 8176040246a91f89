"""Free loopback ports for one run of the local stack, and checks that they are free again.

Ports are checked by binding 127.0.0.1:PORT. Candidates come from below the kernel's ephemeral
range: a port the kernel handed out for bind(0) is also one it may later hand to an outgoing
connection, and a slurmd started minutes later (a FUTURE node joining) would then fail with
"address in use". Random candidates keep two runs on one machine from picking the same ports.
"""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterable
from pathlib import Path

LOOPBACK = "127.0.0.1"
# Below this we'd meet well-known and registered service ports (and Slurm's default 6817-6819).
LOWEST_CANDIDATE = 20000
_DEFAULT_EPHEMERAL_START = 32768
_MAX_ATTEMPTS = 2000


def ephemeral_range_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_START


def can_bind(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing is bound to host:port (no SO_REUSEADDR, so TIME_WAIT counts as busy)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(count: int, *, avoid: Iterable[int] = ()) -> list[int]:
    """`count` distinct ports that are free on 127.0.0.1 right now."""
    high = ephemeral_range_start() - 1
    low = LOWEST_CANDIDATE if high - LOWEST_CANDIDATE > 1000 else 1024
    taken = set(avoid)
    chosen: list[int] = []
    rng = random.SystemRandom()
    for _ in range(_MAX_ATTEMPTS):
        if len(chosen) == count:
            return chosen
        port = rng.randint(low, high)
        if port not in taken and can_bind(port):
            taken.add(port)
            chosen.append(port)
    if len(chosen) == count:
        return chosen
    return chosen + [_kernel_port(taken) for _ in range(count - len(chosen))]


def free_port() -> int:
    return free_ports(1)[0]


def _kernel_port(taken: set[int]) -> int:
    # Last resort when the low range is crowded: let the kernel choose (bind to port 0).
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            taken.add(port)
            return port


def is_accepting(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False
