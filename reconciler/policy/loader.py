"""The policies of one revision: shipped ones, then the repo's, compiled once."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.config.files import read_shipped_policies
from reconciler.config.policy_file import Override, Policy, parse_policy_file
from reconciler.config.repo import Config
from reconciler.policy.engine import CompiledPolicy, compile_policies, effective_policies

SHIPPED_PREFIX = "(shipped) policies/"


def shipped_documents(shipped: Mapping[str, str]) -> list[Policy | Override]:
    """`shipped` maps file name -> text (config.files.read_shipped_policies)."""
    return [
        doc
        for name, text in sorted(shipped.items())
        for doc in parse_policy_file(text, SHIPPED_PREFIX + name, "shipped")
    ]


def policies_for(config: Config, shipped: Mapping[str, str]) -> tuple[CompiledPolicy, ...]:
    return compile_policies(effective_policies(shipped_documents(shipped), config.policies))


def revision_policies(config: Config) -> tuple[CompiledPolicy, ...]:
    """Shipped policies and the repo's, compiled (the shipped files are read here)."""
    return policies_for(config, read_shipped_policies())


def shipped_policies() -> tuple[CompiledPolicy, ...]:
    """The shipped policies alone, compiled (no repo, or a repo whose own do not compile)."""
    return compile_policies(effective_policies(shipped_documents(read_shipped_policies()), ()))
