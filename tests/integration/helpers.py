"""Small helpers shared by the integration tests."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class FixedToken:
    """A token source that sends exactly the token it was given (to see the server refuse it)."""

    def __init__(self, user: str, value: str) -> None:
        self.user = user
        self._value = value

    def token(self) -> str:
        return self._value


def stop_cleanly(process: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it hangs; it must have exited 0 without a traceback."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    text = log.read_text(errors="replace")
    assert process.returncode == 0, text
    assert "Traceback" not in text, text
