"""What a Pod's author can make the scheduler hold or compute: a Pod of 1.2 MiB (etcd takes
up to 1.5 MiB) held about 8 times that in the cache, and a Pod with thousands of affinity
terms cost a LIST per term. Each test is the attack as written, and asserts what the author
or the operator sees: the Pod cached small and still placed as the whole Pod would be, or
refused with the field, the count and the limit; no request per term.
"""

from __future__ import annotations

import copy
import gc
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.kube_watch import KubeWatch, decode_list
from reconciler.adapters.kube_wire import ObjectList
from reconciler.kuberules.feasibility import filter_nodes
from reconciler.kuberules.pod_rules import MAX_TERMS
from reconciler.scheduler.decide.admission import PodRequest, admit, fingerprint
from reconciler.scheduler.placed_pods import PlacedPods
from reconciler.scheduler.placement import Placement
from reconciler.scheduler.pod_cache import SLIM_BYTES, cache_form, refusal, slimmed
from reconciler.scheduler.state import SchedulerState
from tests.unit.test_hostile_pod_rules import anti_term, pod_with

Obj = dict[str, Any]
MIB = 1024 * 1024
ANTI = "podAntiAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
ROWS: list[Obj] = json.loads(
    (Path(__file__).parent / "data" / "kube_scheduler_verdicts.json").read_text()
)


def bloated(pod: Obj, size: int = int(1.2 * MIB)) -> Obj:
    """The Pod with what the scheduler never reads grown to `size` bytes of JSON: many small
    env entries (the most Python objects per byte), args, a user's annotation, volumes and
    managedFields, as an author may write them."""
    pod = copy.deepcopy(pod)
    meta = pod.setdefault("metadata", {})
    meta.setdefault("uid", "uid-big")
    meta.setdefault("namespace", "default")
    meta.setdefault("name", "big")
    meta["annotations"] = {**(meta.get("annotations") or {}), "example.com/notes": "n" * 60_000}
    meta["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}] * 200
    spec = pod.setdefault("spec", {})
    containers = spec.setdefault("containers", [{"name": "main"}])
    spec["volumes"] = [{"name": f"v{i}", "configMap": {"name": f"c{i}"}} for i in range(500)]
    main = containers[0]
    main["args"] = ["--flag"] * 2_000
    env: list[Obj] = main.setdefault("env", [])
    while len(json.dumps(pod)) < size:
        env.extend({"name": f"V{len(env) + i}", "value": "x"} for i in range(500))
    return pod


def sized(pod: Obj) -> Obj:
    return cache_form(copy.deepcopy(pod), len(json.dumps(pod)))


# ---- slimming ---------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_a_large_pod_is_cached_small_and_placed_as_the_whole_pod(row: Obj) -> None:
    """kube-scheduler's own verdicts (test_kube_feasibility's rows): the slimmed Pod gets the
    same answer from every filter as the large Pod it came from."""
    whole = bloated(row["pod"], size=128 * 1024)
    cached = sized(whole)
    assert slimmed(cached) and refusal(cached) is None
    assert len(json.dumps(cached)) < 8 * 1024, len(json.dumps(cached))
    assert filter_nodes(cached, row["nodes"], row["bound"]) == filter_nodes(
        whole, row["nodes"], row["bound"]
    )


def test_a_slimmed_pod_is_admitted_as_the_whole_pod_and_fingerprinted_as_it() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u",
                     "annotations": {"sunk.coreweave.com/partition": "gpu"}},
        "spec": {"terminationGracePeriodSeconds": 10, "containers": [
            {"name": "main", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
    }  # fmt: skip
    whole = bloated(pod)
    cached = sized(whole)
    assert admit(cached, kill_wait_seconds=30) == admit(whole, kill_wait_seconds=30)
    assert isinstance(admit(cached, kill_wait_seconds=30), PodRequest)
    assert fingerprint(cached) == fingerprint(whole)  # a change anywhere is looked at again


def test_a_pod_under_the_threshold_is_cached_whole_but_for_managed_fields() -> None:
    pod = ROWS[0]["pod"] | {"metadata": {"name": "p", "uid": "u", "managedFields": [{}]}}
    cached = sized(pod)
    assert not slimmed(cached) and "managedFields" not in cached["metadata"]
    assert cached["spec"] == pod["spec"]


def test_a_pod_whose_kept_fields_pass_the_cap_is_refused_naming_size_and_limit() -> None:
    labels = {f"example.com/l{i}": "v" * 60 for i in range(1_000)}  # labels are kept
    whole = bloated({"metadata": {"labels": labels}, "spec": {}})
    cached = sized(whole)
    why = refusal(cached)
    assert why is not None and f"{SLIM_BYTES:,}" in why and "bytes" in why, why
    assert "labels" not in cached["metadata"] and "env" not in json.dumps(cached)
    assert len(json.dumps(cached)) < 2048


# ---- memory ---------------------------------------------------------------------------------


class Lines:
    """A watch's stream as the API server sends it: one JSON event per line."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    def list_path(self, *_: Any, **__: Any) -> ObjectList:
        return ObjectList((), "1")

    def open_stream(self, *_: Any) -> Lines:
        return self

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        while self.lines:
            yield self.lines.pop(0) + b"\n"

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _cached_bytes(count: int) -> tuple[int, int]:
    """(bytes of JSON sent, bytes of Python objects the cache holds after) for `count` Pods
    of 1.2 MiB fed through a watch into the scheduler's cache."""
    template = bloated(ROWS[0]["pod"] | {"metadata": {"namespace": "ml"}})
    lines = []
    for index in range(count):
        pod = copy.deepcopy(template)
        pod["metadata"] |= {"name": f"big-{index}", "uid": f"uid-{index}",
                            "resourceVersion": str(index + 2)}  # fmt: skip
        lines.append(json.dumps({"type": "ADDED", "object": pod}).encode())
    sent = sum(map(len, lines))
    del template, pod
    state = SchedulerState()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    watch = KubeWatch(Lines(lines), "/api/v1/pods", selectors=[], resource_version="1",
                      timeout_seconds=None, shape=cache_form)  # fmt: skip
    for event, obj in watch:
        state.on_pod(event, obj)
        if not lines:
            break
    del watch, event, obj
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(state.pods) == count
    return sent, held


def test_twenty_pods_of_1_2_mib_hold_under_a_mib_in_the_cache() -> None:
    sent, held = _cached_bytes(20)
    assert sent > 20 * MIB
    assert held < 1 * MIB, f"{held / MIB:.1f} MiB held for {sent / MIB:.1f} MiB sent"


def test_a_list_page_of_large_pods_is_never_decoded_whole_at_once() -> None:
    """The restart's list: each item is slimmed as it is decoded, so a page of 1.2 MiB Pods
    peaks at its text plus one whole Pod, not 8 times the page."""
    pods = []
    for index in range(10):
        pod = bloated({"metadata": {"name": f"p{index}", "uid": f"u{index}"}, "spec": {}})
        pods.append(pod)
    payload = json.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
         "items": pods}
    ).encode()  # fmt: skip
    del pods, pod
    gc.collect()
    tracemalloc.start()
    page = decode_list(payload, cache_form)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [p["metadata"]["name"] for p in page["items"]] == [f"p{i}" for i in range(10)]
    assert page["metadata"] == {"resourceVersion": "9"} and page["kind"] == "PodList"
    assert peak < 2 * len(payload) + 20 * MIB, (peak / MIB, len(payload) / MIB)


def test_a_list_page_decodes_as_json_loads_does() -> None:
    page = {"kind": "PodList", "apiVersion": "v1", "metadata": {"continue": "a,b"},
            "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}  # fmt: skip
    for text in (json.dumps(page), json.dumps(page, indent=2), json.dumps(page | {"items": []})):
        assert decode_list(text.encode(), lambda obj, _: obj) == json.loads(text)


def test_fifteen_thousand_terms_as_cached_are_refused_with_count_size_and_limits() -> None:
    """1.2 MiB of terms: over the cap even slimmed, so only the Pod's identity is cached."""
    cached = sized(pod_with(affinity={ANTI: {REQUIRED: [anti_term(i) for i in range(15_000)]}}))
    why = refusal(cached)
    assert why is not None and "15,000" in why and f"at most {MAX_TERMS}" in why, why
    assert f"{SLIM_BYTES:,}" in why and "affinity" not in cached["spec"]


# ---- no request per term --------------------------------------------------------------------


class Listing:
    """The API server's Pods, counting the LISTs asked of it."""

    def __init__(self, pods: list[Obj]) -> None:
        self.pods, self.lists = pods, 0

    def list(self, api_version: str, kind: str, namespace: str, **_: Any) -> ObjectList:
        self.lists += 1
        return ObjectList(tuple(p for p in self.pods if p["metadata"]["namespace"] == namespace),
                          "1")  # fmt: skip


def test_excluded_nodes_asks_no_list_per_term() -> None:
    state = SchedulerState()
    for name in ("n1", "n2"):
        state.on_node(
            "ADDED", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
        )
        state.on_slurmd_pod("ADDED", {"metadata": {"name": f"s-{name}"},
                                      "spec": {"nodeName": name}})  # fmt: skip
    web = {"metadata": {"namespace": "ml", "name": "web", "uid": "w", "labels": {"app": "a3"}},
           "spec": {"nodeName": "n1"}, "status": {}}  # fmt: skip
    api = Listing([web])
    placement = Placement(state, PlacedPods(api, spawn=lambda *_: None))  # type: ignore[arg-type]
    pod = pod_with(affinity={ANTI: {REQUIRED: [anti_term(i) for i in range(MAX_TERMS)]}})
    assert placement.excluded_nodes(pod) == ["s-n1"]  # a3 runs on n1
    assert placement.excluded_nodes(pod) == ["s-n1"]
    assert placement.topology_allows(pod, "n2") and not placement.topology_allows(pod, "n1")
    assert api.lists == 1  # the namespace, once; then its watch keeps it current
