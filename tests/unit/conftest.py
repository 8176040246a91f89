from __future__ import annotations

import os
import textwrap
from collections.abc import Callable

import pytest
from hypothesis import settings

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.files import read_library
from reconciler.config.repo import Config, load_config

LIBRARY = read_library()

# CI passes or fails on the code, not on the draw: there, each property test runs a fixed
# sequence of examples (derived from the test), so a failure reproduces on any machine; a
# developer's run still explores new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def config_from(values: str, files: dict[str, str] | None = None, **kw: object) -> Config:
    """A Config from YAML text, as if the repo held values.yaml (+ other files)."""
    repo = {"values.yaml": textwrap.dedent(values)}
    repo.update({k: textwrap.dedent(v) for k, v in (files or {}).items()})
    return load_config(repo, LIBRARY, **kw)  # type: ignore[arg-type]


@pytest.fixture
def compile_values() -> Callable[..., DesiredState]:
    def run(values: str, files: dict[str, str] | None = None) -> DesiredState:
        return compile_desired_state(config_from(values, files))

    return run
