"""`kubectl kustomize` of a deploy/ folder: the objects a user's `kubectl apply -k` sends."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml


def kustomize(folder: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl (for `kubectl kustomize`) is not installed: run .ci/run's setup")
    done = subprocess.run(
        [kubectl, "kustomize", str(folder)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]
