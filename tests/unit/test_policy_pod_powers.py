"""A Pod's `sunk.coreweave.com/user-id` 0 (root) and its
`sunk.coreweave.com/priority` are the operator's to give. The shipped policies
`pod-user-id-allowed` and `pod-priority-at-most-max` refuse them by default; values
`scheduler.podPolicy.allowedUserIds` (per namespace) and `scheduler.podPolicy.maxPriority`
reach them as `params`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from reconciler import wellknown as wk
from reconciler.config.files import read_library, read_repo, read_shipped_policies
from reconciler.config.repo import load_config
from reconciler.errors import ConfigTypeError
from reconciler.policy.engine import Finding, compile_policies, effective_policies, evaluate
from reconciler.policy.loader import shipped_documents
from reconciler.policy.subjects import default_params, params_of
from reconciler.scheduler.decide.admission import PodRequest, admit
from tests.unit.conftest import config_from

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
PODS = ROOT / "fixtures" / "pods"
USER_ID_POLICY = "pod-user-id-allowed"
PRIORITY_POLICY = "pod-priority-at-most-max"
TEAM_A = {"team-a": [1001]}  # values that let the Pods below run as SUNK's example uid
SHIPPED = tuple(
    p
    for p in compile_policies(effective_policies(shipped_documents(read_shipped_policies()), ()))
    if p.policy.target == "pod"
)


def pod(namespace: str = "team-a", **annotations: str) -> dict[str, Any]:
    """A Pod every other shipped policy admits."""
    meta: dict[str, Any] = {"name": "p", "namespace": namespace}
    if annotations:
        meta["annotations"] = {f"{wk.SUNK_DOMAIN}/{k.replace('_', '-')}": v
                               for k, v in annotations.items()}  # fmt: skip
    return {
        "metadata": meta,
        "spec": {
            "schedulerName": "slurm-slurm-slurm-scheduler",
            "terminationGracePeriodSeconds": 20,
            "containers": [
                {"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
            ],
        },
    }


def denials(obj: dict[str, Any], **params: Any) -> dict[str, Finding]:
    found = evaluate(SHIPPED, "pod", obj, "the Pod", params={**default_params(), **params})
    assert not [f for f in found if f.reason == "InternalError"], found
    return {f.policy: f for f in found if f.denies}


# ---- user-id -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["user_id", "group_id", "priority"])
def test_a_long_value_is_named_by_its_length_not_repeated(key: str) -> None:
    """A 4,301-digit annotation was quoted whole in the denial, so in the Event (cut at its
    limit) and in full in the scheduler's log line."""
    value = "9" * 4301
    found = denials(pod(**{"user_id": "1001", key: value}), allowedUserIds=TEAM_A)
    assert found, "denied"
    for finding in found.values():
        assert "99999999999999999999999999999999" not in finding.message, finding.message
    assert any("of 4301 characters" in f.message for f in found.values()), found


def test_user_id_0_is_denied_by_default_and_says_how_to_allow_it() -> None:
    found = denials(pod(user_id="0"))
    assert set(found) == {USER_ID_POLICY}
    message = found[USER_ID_POLICY].message
    assert "root" in message and "team-a" in message
    assert "scheduler.podPolicy.allowedUserIds" in message


def test_a_namespace_without_an_entry_runs_no_uid_values_do_not_list() -> None:
    """Any non-root uid was admitted in a namespace allowedUserIds did not list: a Pod could run its
    job as another tenant's user, or SlurmUser, by naming its uid. The examples of SUNK's "Schedule
    Kubernetes Pods with Slurm": user-id 1001, and none at all (root): both need values now."""
    found = denials(pod(user_id="1001"))
    assert set(found) == {USER_ID_POLICY}
    message = found[USER_ID_POLICY].message
    assert "user-id 1001" in message and "namespace team-a has no entry" in message
    assert "scheduler.podPolicy.allowedUserIds.team-a" in message
    assert set(denials(pod())) == {USER_ID_POLICY}
    allowed = {"team-a": [1001]}
    assert denials(pod(user_id="1001", account="root"), allowedUserIds=allowed) == {}


def test_without_an_entry_only_the_operators_default_user_runs() -> None:
    """defaultUserId is a uid the operator chose: a namespace without an entry runs as it
    (named or by leaving user-id out), and as nothing else; root never by default."""
    assert denials(pod(), defaultUserId=1001) == {}
    assert denials(pod(user_id="1001"), defaultUserId=1001) == {}
    assert set(denials(pod(user_id="1002"), defaultUserId=1001)) == {USER_ID_POLICY}
    assert set(denials(pod(user_id="0"), defaultUserId=0)) == {USER_ID_POLICY}


def test_the_wildcard_entry_is_what_a_namespace_without_its_own_may_run_as() -> None:
    allowed = {"*": [1001, 1002], "ops": [0]}
    assert denials(pod(user_id="1002"), allowedUserIds=allowed) == {}
    refused = denials(pod(user_id="1003"), allowedUserIds=allowed)
    assert set(refused) == {USER_ID_POLICY}
    message = refused[USER_ID_POLICY].message
    assert "user-id 1003" in message and "1001, 1002" in message
    assert "scheduler.podPolicy.allowedUserIds.team-a" in message
    assert set(denials(pod("ops", user_id="1001"), allowedUserIds=allowed)) == {USER_ID_POLICY}
    assert set(denials(pod(user_id="0"), allowedUserIds=allowed)) == {USER_ID_POLICY}


@given(st.text(alphabet=" \t\n\x1c\x1f\x85\xa0\u3000-+0123456789_x", max_size=8))
def test_whatever_admission_reads_as_uid_0_the_policy_denies(text: str) -> None:
    """The policy must not be fooled by a spelling admission reads as 0 ("-0", "00", a
    space Python strips and Go does not), even with pod-integer-annotations switched off."""
    request = admit(pod(user_id=text), kill_wait_seconds=30)
    if isinstance(request, PodRequest) and request.user_id == 0:
        assert USER_ID_POLICY in denials(pod(user_id=text))


@pytest.mark.parametrize("text", ["0", " 0 ", "-0", "00", "\x1c0"])
def test_spellings_of_root_are_root(text: str) -> None:
    assert USER_ID_POLICY in denials(pod(user_id=text))


def test_a_non_integer_user_id_is_left_to_pod_integer_annotations() -> None:
    assert set(denials(pod(user_id="alice"))) == {"pod-integer-annotations"}


def test_a_listed_namespace_admits_only_its_user_ids() -> None:
    allowed = {"team-a": [1001, 1002], "ops": [0, 1001]}
    assert denials(pod(user_id="1002"), allowedUserIds=allowed) == {}
    refused = denials(pod(user_id="1003"), allowedUserIds=allowed)
    assert set(refused) == {USER_ID_POLICY}
    assert "1001, 1002" in refused[USER_ID_POLICY].message
    assert "1003" in refused[USER_ID_POLICY].message
    # Without the annotation the job runs as the operator's user (root): 0 must be listed.
    assert set(denials(pod(), allowedUserIds=allowed)) == {USER_ID_POLICY}
    assert denials(pod("ops"), allowedUserIds=allowed) == {}
    assert denials(pod("ops", user_id="0"), allowedUserIds=allowed) == {}
    # A namespace not listed: none of them.
    assert set(denials(pod("team-b", user_id="1003"), allowedUserIds=allowed)) == {USER_ID_POLICY}
    assert set(denials(pod("team-b", user_id="0"), allowedUserIds=allowed)) == {USER_ID_POLICY}


def test_an_empty_list_admits_no_pod_in_that_namespace() -> None:
    assert set(denials(pod(user_id="1001"), allowedUserIds={"team-a": []})) == {USER_ID_POLICY}
    assert set(denials(pod(), allowedUserIds={"team-a": []})) == {USER_ID_POLICY}


# ---- priority ------------------------------------------------------------------------------


def test_a_priority_above_the_default_ceiling_is_denied() -> None:
    assert denials(pod(priority="1000", user_id="1001"), allowedUserIds=TEAM_A) == {}
    found = denials(pod(priority="1001", user_id="1001"), allowedUserIds=TEAM_A)
    assert set(found) == {PRIORITY_POLICY}
    assert "1001" in found[PRIORITY_POLICY].message and "1000" in found[PRIORITY_POLICY].message
    assert "scheduler.podPolicy.maxPriority" in found[PRIORITY_POLICY].message


@pytest.mark.parametrize("text", ["5000", " 5000", "\x1c5000", "99999999999999999999999"])
def test_spellings_of_a_high_priority_are_denied_cleanly(text: str) -> None:
    assert PRIORITY_POLICY in denials(pod(priority=text))


def test_the_ceiling_comes_from_params() -> None:
    assert denials(pod(priority="5000", user_id="1001"), maxPriority=5000,
                   allowedUserIds=TEAM_A) == {}  # fmt: skip
    assert set(denials(pod(priority="100", user_id="1001"), maxPriority=10,
                       allowedUserIds=TEAM_A)) == {PRIORITY_POLICY}  # fmt: skip


# ---- values -> params ----------------------------------------------------------------------

VALUES = """\
scheduler:
  podPolicy:
    allowedUserIds:
      team-a: [1001, 1002]
      ops: [0]
    maxPriority: 5000
"""


def test_values_reach_the_policies_as_params() -> None:
    config = config_from(VALUES)
    assert config.warnings == ()
    params = params_of(config)
    assert params["allowedUserIds"] == {"team-a": [1001, 1002], "ops": [0]}
    assert params["maxPriority"] == 5000
    assert denials(pod("ops", user_id="0"), **params) == {}
    assert set(denials(pod(user_id="0"), **params)) == {USER_ID_POLICY}


def test_a_later_values_file_replaces_a_list_and_null_drops_a_namespace() -> None:
    later = """\
    scheduler:
      podPolicy:
        allowedUserIds:
          team-a: null
          ops: [0, 5]
        maxPriority: 50
    """
    config = config_from(VALUES, {"values.d/10-later.yaml": later})
    assert config.warnings == ()
    params = params_of(config)
    assert params["allowedUserIds"] == {"ops": [0, 5]} and params["maxPriority"] == 50


def test_the_defaults_without_values() -> None:
    params = params_of(config_from("scheduler: {enabled: true}\n"))
    assert params["allowedUserIds"] == {} and params["maxPriority"] == 1000
    assert {k: default_params()[k] for k in ("allowedUserIds", "maxPriority")} == {
        "allowedUserIds": {}, "maxPriority": 1000,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("values", "where", "wanted"),
    [
        ("scheduler:\n  podPolicy: [1]\n", "values.yaml:2", "mapping"),
        ("scheduler:\n  podPolicy:\n    maxPriority: high\n", "values.yaml:3", "integer"),
        ("scheduler:\n  podPolicy:\n    maxPriority: 0\n", "values.yaml:3", "1 or more"),
        ("scheduler:\n  podPolicy:\n    allowedUserIds: [1001]\n", "values.yaml:3", "mapping"),
        ("scheduler:\n  podPolicy:\n    allowedUserIds:\n      team-a: 1001\n",
         "values.yaml:4", "list of integers"),
        ("scheduler:\n  podPolicy:\n    allowedUserIds:\n      team-a: [1001, alice]\n",
         "values.yaml:4", "integer"),
        ("scheduler:\n  podPolicy:\n    allowedUserIds:\n      team-a: [-1]\n",
         "values.yaml:4", "0 or more"),
        ("scheduler:\n  podPolicy:\n    allowedUserIds:\n      team-a: [true]\n",
         "values.yaml:4", "integer"),
    ],
)  # fmt: skip
def test_a_wrong_value_names_its_file_and_line(values: str, where: str, wanted: str) -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from(values)
    assert str(err.value).startswith(where), str(err.value)
    assert wanted in str(err.value)


def test_a_typo_under_pod_policy_is_reported_with_the_closest_key() -> None:
    config = config_from("scheduler:\n  podPolicy:\n    maxPriorty: 5\n")
    [warning] = [str(w) for w in config.warnings]
    assert "scheduler.podPolicy.maxPriorty" in warning and "'maxPriority'" in warning


# ---- what must still be admitted -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.stem for p in PODS.glob("*.yaml")))
def test_the_page_pods_are_admitted_with_the_fixture_repo(name: str) -> None:
    params = params_of(load_config(read_repo(FIXTURE_REPO), read_library()))
    for obj in yaml.safe_load_all((PODS / f"{name}.yaml").read_text()):
        found = denials(obj, **params)
        assert USER_ID_POLICY not in found and PRIORITY_POLICY not in found, found
