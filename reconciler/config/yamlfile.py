"""YAML files as plain data plus the line each key came from.

Errors name the file and line; `--explain` names the line that set each value. Both need
positions, which PyYAML only has on its node tree, so we compose the tree, construct plain
data from it, and walk it once to record where every key path starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.config.limits import ValueBudget, check_events, check_file_size
from reconciler.errors import ConfigSyntaxError, Location

try:  # libyaml is several times faster; fall back to pure Python where it is missing
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlFile:
    """One parsed document: its data and the 1-based line of every key path."""

    name: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def location(self, path: KeyPath) -> Location:
        """The closest recorded line for `path` (falls back to its parents)."""
        probe = path
        while probe and probe not in self.lines:
            probe = probe[:-1]
        return Location(self.name, self.lines.get(probe), format_path(path) or None)


def lookup(data: Any, path: Sequence[str | int]) -> tuple[Any, bool]:
    """(value, True) at `path` in nested mappings, or (None, False) where a key is missing."""
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None, False
        data = data[key]
    return data, True


def format_path(path: KeyPath) -> str:
    """`('compute', 'nodes', 'a', 'env', 0)` -> `compute.nodes.a.env[0]`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def parse_yaml(text: str, name: str, budget: ValueBudget | None = None) -> YamlFile:
    """Parse one YAML document (an empty file is an empty mapping). `budget` is shared by
    every file of one load; without it the file has the whole budget to itself."""
    with _loader(text, name, budget or ValueBudget()) as loader:
        node = loader.get_single_node()
        if node is None:
            return YamlFile(name, {}, {})
        data = loader.construct_document(node)
    return _with_lines(name, node, data)


def parse_yaml_documents(text: str, name: str, budget: ValueBudget | None = None) -> list[YamlFile]:
    """Every document of a `---`-separated stream (empty documents skipped), each with the
    lines of its keys in the whole file."""
    documents: list[YamlFile] = []
    with _loader(text, name, budget or ValueBudget()) as loader:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                documents.append(_with_lines(name, node, loader.construct_document(node)))
    return [doc for doc in documents if doc.data is not None]


def check_yaml_limits(text: str, name: str, budget: ValueBudget) -> None:
    """Charge a file that is parsed elsewhere (a policy) to the repo's budget, first."""
    with _loader(text, name, budget):
        pass


@contextlib.contextmanager
def _loader(text: str, name: str, budget: ValueBudget) -> Iterator[Any]:
    """A loader whose YAML errors become ConfigSyntaxErrors naming the file and line, for a
    text that passed the limits (reconciler/config/limits.py): its events are checked by a
    first parser before a second one builds anything."""
    check_file_size(len(text.encode("utf-8", "surrogatepass")), name)
    loaders = [_Loader(text)]
    try:
        check_events(loaders[0], name, budget)
        loaders.append(_Loader(text))
        yield loaders[1]
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, name) from None
    except yaml.YAMLError as exc:
        raise ConfigSyntaxError(f"invalid YAML: {exc}", where=Location(name)) from None
    except ValueError as exc:  # an unquoted value YAML types but cannot build: 2030-13-01
        raise ConfigSyntaxError(
            f"invalid YAML value: {exc}",
            where=Location(name),
            hint="quote dates and times that are not real ones, or fix them",
        ) from None
    finally:
        for loader in loaders:
            loader.dispose()


def _with_lines(name: str, node: yaml.Node, data: Any) -> YamlFile:
    lines: dict[KeyPath, int] = {}
    _record_lines(node, (), lines, name)
    return YamlFile(name, data, lines)


def _syntax_error(exc: yaml.MarkedYAMLError, name: str) -> ConfigSyntaxError:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    problem = exc.problem or str(exc)
    if exc.context:
        problem = f"{exc.context}, {problem}"
    return ConfigSyntaxError(
        f"invalid YAML: {problem}",
        where=Location(name, line),
        hint="check indentation and quoting on that line (tabs are not allowed in YAML)",
    )


def _record_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], name: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merged pairs were already spliced into node.value by the constructor
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen and _inside(key_node, node):
                raise ConfigSyntaxError(
                    f"duplicate key {key!r} (first at line {seen[key]})",
                    where=Location(name, line, format_path((*path, key))),
                    hint="YAML keeps only the last one; remove or merge the duplicate",
                )
            if _inside(key_node, node):
                seen[key] = line
            lines[(*path, key)] = line
            _record_lines(value_node, (*path, key), lines, name)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _record_lines(item, (*path, index), lines, name)


def _inside(key_node: yaml.Node, mapping: yaml.Node) -> bool:
    """True for a key written in this mapping, false for one spliced in by a `<<` merge."""
    return mapping.start_mark.index <= key_node.start_mark.index <= mapping.end_mark.index
