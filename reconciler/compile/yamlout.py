"""Deterministic YAML text: same data in, byte-identical text out (Argo CD CMP `generate`).
The one writer of the YAML we print (render, compile, plan diffs): every value in full."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

try:
    from yaml import CSafeDumper as _BaseDumper
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeDumper as _BaseDumper  # type: ignore[assignment]


class _Dumper(_BaseDumper):
    """Multi-line strings (slurm.conf, scripts) as literal blocks so they read like files, and
    every value written out in full where it appears: the compiler shares one dict between
    places (a StatefulSet's labels and its Pod template's), and PyYAML would print the second
    as an alias (`&id001` ... `*id001`), which kubectl diff and reviewers read badly. Our data
    hold no cycles, the one case aliases are needed for."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(c in value for c in "\t\r") and value == value.rstrip(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)  # type: ignore[arg-type]  # the stubs want the base Dumper


def dump(data: Any) -> str:
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=1_000_000,
        allow_unicode=True,
    )


def dump_stream(documents: Iterable[Any]) -> str:
    return "".join(f"---\n{dump(doc)}" for doc in documents)
