"""The Flux artifact source against the real API server: a GitRepository (Flux's v1 CRD shape)
whose status points at a tarball served on loopback, as source-controller publishes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.kube import Kube
from reconciler.errors import SourceError
from reconciler.sources.flux import FluxArtifactSource
from tests.integration.endpoints import KubeEndpoints
from tests.integration.flux_fixture import (
    Artifacts,
    install_crd,
    publish,
    remove_crd,
    serving_artifacts,
    tarball,
)
from tests.integration.helpers import unique


@pytest.fixture(scope="module")
def k(kube: KubeEndpoints) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(kube.kubeconfig)
    install_crd(client)
    yield client
    remove_crd(client)
    client.close()


@pytest.fixture(scope="module")
def artifacts() -> Iterator[Artifacts]:
    yield from serving_artifacts()


def test_flux_artifact_is_downloaded_checked_and_unpacked(
    k: Kube, artifacts: Artifacts, tmp_path: Path
) -> None:
    name = unique("config")
    publish(k, artifacts, name, "main@sha1:" + "a" * 40, tarball({"values.yaml": "a: 1\n"}))
    source = FluxArtifactSource(k, "default", name, tmp_path)
    first = source.fetch()
    assert first.id == "main@sha1:" + "a" * 40
    assert (first.path / "values.yaml").read_text() == "a: 1\n"
    assert source.fetch() == first
    publish(k, artifacts, name, "main@sha1:" + "b" * 40, tarball({"values.yaml": "a: 2\n"}))
    second = source.fetch()
    assert (second.path / "values.yaml").read_text() == "a: 2\n"
    assert (first.path / "values.yaml").read_text() == "a: 1\n", "a revision never changes"


def test_a_digest_mismatch_is_refused(k: Kube, artifacts: Artifacts, tmp_path: Path) -> None:
    name = unique("tampered")
    publish(k, artifacts, name, "main@sha1:" + "c" * 40, tarball({"values.yaml": "evil\n"}),
            digest="0" * 64)  # fmt: skip
    with pytest.raises(SourceError, match="refusing to use it"):
        FluxArtifactSource(k, "default", name, tmp_path).fetch()
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_no_repository_or_no_artifact(k: Kube, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        FluxArtifactSource(k, "default", unique("absent"), tmp_path).fetch()
    name = unique("fresh")
    k.apply({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
             "metadata": {"name": name, "namespace": "default"}, "spec": {}})  # fmt: skip
    with pytest.raises(SourceError, match="no artifact yet"):
        FluxArtifactSource(k, "default", name, tmp_path).fetch()
