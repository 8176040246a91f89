"""Every YAML we print is written out in full: no anchors or aliases (`&id001`, `*id001`),
which kubectl diff and reviewers read badly. All of it goes through compile/yamlout.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reconciler.compile.yamlout import dump, dump_stream
from tests.unit.page_cluster import page_repo, reconciler

ALIAS = re.compile(r"(?<![\w&*])[&*]id\d+\b")


def anchors_and_aliases(text: str) -> list[str]:
    """Each anchor or alias a YAML parser sees in text (a stream of documents)."""
    found = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            found.append(f"*{event.anchor}")
        elif getattr(event, "anchor", None):
            found.append(f"&{event.anchor}")
    return found


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return page_repo(tmp_path_factory.mktemp("slurm-page-examples"))


def test_data_shared_between_objects_is_written_out_each_time() -> None:
    labels = {"app.kubernetes.io/name": "slurmd"}
    statefulset = {"metadata": {"labels": labels}, "spec": {"template": {"metadata": {
        "labels": labels}}}}  # fmt: skip
    for text in (dump(statefulset), dump_stream([statefulset, {"labels": labels}])):
        assert anchors_and_aliases(text) == []
        assert text.count("app.kubernetes.io/name: slurmd") == text.count("labels:")
    assert yaml.safe_load(dump(statefulset)) == statefulset


def test_render_has_no_anchors_or_aliases(repo: Path) -> None:
    text = reconciler("render", str(repo))
    assert anchors_and_aliases(text) == []
    assert "kind: StatefulSet" in text


def test_compile_has_no_anchors_or_aliases(repo: Path) -> None:
    assert anchors_and_aliases(reconciler("compile", str(repo))) == []


def test_plan_diffs_have_no_anchors_or_aliases(repo: Path) -> None:
    # The plan's text is diff lines of YAML, not YAML itself: look for the marks.
    text = reconciler("plan", str(repo), "--offline")
    assert "+ StatefulSet slurm/slurm-login (create)" in text
    assert ALIAS.findall(text) == []
