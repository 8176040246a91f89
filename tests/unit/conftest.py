from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.config.files import read_library
from reconciler.config.repo import Config, load_config

LIBRARY = read_library()


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
