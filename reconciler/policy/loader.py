"""The policies of one revision: shipped ones, then the repo's, compiled once."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.config.repo import Config
from reconciler.policy.document import Override, Policy, parse_policy_file
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
