"""The hooks API's HMAC key Secret against a real kube-apiserver: made once and shared by
every replica, and never silently replaced by a key of this process's own (each replica
would then refuse the others' placeholder jobs)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import pytest

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.errors import ReconcilerError
from reconciler.scheduler.pod_writer import load_hooks_key
from tests.integration.endpoints import KubeEndpoints

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def k(kube: KubeEndpoints) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(kube.kubeconfig)
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hooks-key"}})
    yield client
    client.close()


def test_two_replicas_get_one_key_and_it_is_the_stored_one(k: Kube) -> None:
    name = f"hooks-{uuid.uuid4().hex[:8]}"
    first, second = load_hooks_key(k, "hooks-key", name), load_hooks_key(k, "hooks-key", name)
    stored = k.get("v1", "Secret", name, "hooks-key")
    assert stored is not None
    assert first == second == base64.b64decode(stored["data"][wk.HOOKS_SECRET_KEY])


def test_a_secret_without_the_key_is_an_error_that_names_it(k: Kube) -> None:
    name = f"hooks-{uuid.uuid4().hex[:8]}"
    k.create({"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": name, "namespace": "hooks-key"},
              "data": {"other": base64.b64encode(b"x").decode()}})  # fmt: skip
    with pytest.raises(ReconcilerError, match=f"Secret hooks-key/{name} has no key"):
        load_hooks_key(k, "hooks-key", name)


def test_a_refused_create_is_an_error_not_a_key_of_our_own(k: Kube) -> None:
    """A namespace that does not exist: the API server refuses the create (404). Before,
    the replica went on with a key nobody else had."""
    with pytest.raises(ReconcilerError, match="cannot make the hooks API's key Secret"):
        load_hooks_key(k, f"missing-{uuid.uuid4().hex[:8]}", "hooks")
