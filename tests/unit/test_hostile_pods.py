"""What a Pod's author can write to hurt the daemon or gain the operator's powers.

Each test is the attack as written, and asserts what the author sees: the refusal that names
the annotation and the limit, or the policy's Deny.
"""

from __future__ import annotations

import dataclasses
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler import hostlists
from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.errors import ConfigTypeError
from reconciler.policy.subjects import default_params, params_of
from reconciler.scheduler.decide.admission import PodRequest, Problem, Rejection, admit
from reconciler.scheduler.decide.gang_decide import capped_requests, gang_key
from reconciler.scheduler.decide.ownership import Claim, Ownership, run_as_users
from reconciler.scheduler.settings import settings_from_values
from tests.unit.conftest import config_from
from tests.unit.test_policy_pod_powers import TEAM_A, USER_ID_POLICY, denials, pod
from tests.unit.test_scheduler_pod_decide import slurm_job

# 119 bytes that python-hostlist alone expands to 1,000,000 names (2.3 s, 148 MB before).
BOMB = ",".join(f"x{digit}[0-99999]" for digit in range(10))


# ---- item 1: hostlist annotations ----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "key"),
    [
        ("excluded_nodes", wk.ANNOTATION_EXCLUDED_NODES),
        ("required_nodes", wk.ANNOTATION_REQUIRED_NODES),
    ],
)
def test_a_hostlist_bomb_is_refused_fast_naming_the_annotation_and_the_limit(
    field: str, key: str
) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    result = admit(pod(**{field: BOMB}), kill_wait_seconds=30)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(result, Rejection), "a million node names were accepted"
    [line] = result.message().splitlines()
    assert key in line and "1,000,000" in line and "65,536" in line, line
    assert elapsed < 0.1 and peak < 2_000_000, (elapsed, peak)


def test_a_hostlist_at_the_limit_is_still_admitted() -> None:
    text = f"n[1-{hostlists.MAX_NAMES}]"
    result = admit(pod(excluded_nodes=text), kill_wait_seconds=30)
    assert not isinstance(result, Rejection), result
    assert len(result.excluded_nodes) == hostlists.MAX_NAMES


def test_one_name_past_the_limit_is_refused() -> None:
    text = f"n[0-{hostlists.MAX_NAMES}]"
    result = admit(pod(required_nodes=text), kill_wait_seconds=30)
    assert isinstance(result, Rejection)
    assert "65,537" in result.message() and wk.ANNOTATION_REQUIRED_NODES in result.message()


# ---- item 9a: on Slurm 22.05 a job is vouched for by its own Pod's user --------------------

P_UID, Q_UID = "0b6a7a53-0000-4000-8000-00000000000a", "0b6a7a53-0000-4000-8000-00000000000b"
SCHEDULER = "tenant-slurm-scheduler"


def _named(uid: str, namespace: str = "team-a", **annotations: str) -> dict[str, Any]:
    obj = pod(namespace, **annotations)
    obj["metadata"].setdefault("annotations", {})
    obj["metadata"]["uid"] = uid
    return obj


def _look_alike(key: str, user_id: int) -> SlurmJob:
    """`sbatch -J 'pod:ns/p@<key>:<scheduler>'` by a Slurm user, on a server without admin
    comments (22.05), while no record names the job yet."""
    return dataclasses.replace(
        slurm_job(), job_id=77, name=f"pod:team-a/p@{key}:{SCHEDULER}", state="PENDING",
        user_name=str(user_id), user_id=user_id, admin_comment="",
    )  # fmt: skip


def test_a_look_alike_is_vouched_for_only_by_its_own_pods_user() -> None:
    """Pod P runs as 2002, Pod Q as 1001: Q's user names a job after P. Taken for P's job,
    it would be bound, deleted or cancelled in P's name."""
    pods = [_named(P_UID, user_id="2002"), _named(Q_UID, user_id="1001")]
    owner = Ownership(SCHEDULER, "slurm", marked=False, users=run_as_users(pods))
    assert owner.claim(_look_alike(P_UID, 1001)) == Claim(P_UID, vouched=False)
    assert owner.claim(_look_alike(P_UID, 2002)) == Claim(P_UID, vouched=True)
    assert owner.claim(_look_alike(Q_UID, 1001)) == Claim(Q_UID, vouched=True)


def test_a_pod_without_user_id_vouches_for_the_operator_only() -> None:
    pods = [_named(P_UID), _named(Q_UID, user_id=" 1001 ")]
    owner = Ownership(SCHEDULER, "slurm", marked=False, users=run_as_users(pods))
    assert owner.claim(_look_alike(P_UID, 1001)) == Claim(P_UID, vouched=False)
    assert owner.claim(_look_alike(Q_UID, 1001)).vouched  # type: ignore[union-attr]


def test_a_gangs_job_is_vouched_for_by_its_members_user() -> None:
    members = [_named(P_UID, user_id="1001"), _named(Q_UID)]
    for member in members:
        member["metadata"]["annotations"][wk.ANNOTATION_POD_GROUP] = "g"
    users = run_as_users([*members, _named("other", user_id="2002")])
    assert users[gang_key("team-a", "g")] == frozenset({"1001"})
    assert "2002" not in users[gang_key("team-a", "g")]


# ---- item 2: what is refused when asked must not be obtained by omission -------------------


def test_a_pod_without_user_id_does_not_get_root_by_omission() -> None:
    """SUNK's "Schedule Kubernetes Pods with Slurm": without user-id the job runs as root, which
    user-id "0" is denied."""
    found = denials(pod())
    assert set(found) == {USER_ID_POLICY}, found
    message = found[USER_ID_POLICY].message
    assert "without sunk.coreweave.com/user-id" in message and "root" in message
    assert "scheduler.podPolicy.defaultUserId" in message
    assert "scheduler.podPolicy.allowedUserIds" in message


def test_group_id_0_is_root_s_group_explicit_or_by_default() -> None:
    found = denials(pod(user_id="1001", group_id="0"), allowedUserIds=TEAM_A)
    assert set(found) == {USER_ID_POLICY}
    assert "group" in found[USER_ID_POLICY].message and "0" in found[USER_ID_POLICY].message
    assert denials(pod(user_id="1001", group_id="1001"), allowedUserIds=TEAM_A) == {}
    assert denials(pod(user_id="1001"), allowedUserIds=TEAM_A) == {}  # the group: 1001


@pytest.mark.parametrize(
    ("annotation", "text"),
    [("user_id", "4294967294"), ("user_id", "4294967295"), ("user_id", "99999999999999999999"),
     ("group_id", "4294967295"), ("group_id", "0004294967294")],
)  # fmt: skip
def test_ids_slurm_reads_as_no_val_or_infinite_are_refused(annotation: str, text: str) -> None:
    annotations = {"user_id": "1001", annotation: text}
    found = denials(pod(**annotations), allowedUserIds=TEAM_A)
    assert set(found) == {USER_ID_POLICY}, found
    assert "4294967293" in found[USER_ID_POLICY].message
    result = admit(pod(**annotations), kill_wait_seconds=30)
    assert isinstance(result, Rejection)
    assert "4294967293" in result.message() and "id" in result.message()


def test_the_largest_real_id_is_admitted() -> None:
    largest = {"team-a": [4294967293]}
    assert denials(pod(user_id="4294967293", group_id="4294967293"), allowedUserIds=largest) == {}
    assert not isinstance(admit(pod(user_id="4294967293"), kill_wait_seconds=30), Rejection)


def test_values_allow_root_explicitly_or_name_a_default_uid() -> None:
    assert denials(pod("ops"), allowedUserIds={"ops": [0]}) == {}
    assert denials(pod("ops", user_id="5", group_id="0"), allowedUserIds={"ops": [0, 5]}) == {}
    assert denials(pod(), defaultUserId=1001) == {}
    # The default is judged as the uid it is: a listed namespace must list it.
    assert set(denials(pod(), defaultUserId=1001, allowedUserIds={"team-a": [7]})) == {
        USER_ID_POLICY
    }
    assert denials(pod(), defaultUserId=7, allowedUserIds={"team-a": [7]}) == {}


_ID_TEXT = st.one_of(
    st.none(),
    st.sampled_from(["0", "-0", "00", " 0", "1001", "4294967293", "4294967294", "-5", "x"]),
    st.integers(0, 2**33).map(str),
)


@given(uid=_ID_TEXT, gid=_ID_TEXT, default=st.sampled_from([0, 1001]))
def test_the_policy_judges_the_ids_admission_submits(
    uid: str | None, gid: str | None, default: int
) -> None:
    """Whatever (uid, gid) admission would submit, after the defaults of SUNK's "Schedule Kubernetes
    Pods with Slurm": with root in either, an id past 4294967293, or, in a namespace values do not
    list, a uid other than the operator's default, the shipped policy denies the Pod."""
    annotations = {k: v for k, v in (("user_id", uid), ("group_id", gid)) if v is not None}
    obj = pod(**annotations)
    request = admit(obj, kill_wait_seconds=30, default_user_id=default or None)
    denied = USER_ID_POLICY in denials(obj, defaultUserId=default)
    if isinstance(request, PodRequest):
        user = 0 if request.user_id is None else request.user_id
        group = user if request.group_id is None else request.group_id
        assert denied == (0 in (user, group) or user != default), (user, group)


def test_values_default_user_id_reaches_the_policy_admission_and_ownership() -> None:
    values = "scheduler:\n  podPolicy:\n    defaultUserId: 1001\n"
    config = config_from(values)
    assert config.warnings == ()
    assert params_of(config)["defaultUserId"] == 1001
    assert default_params()["defaultUserId"] == 0  # SUNK's default: root
    settings = settings_from_values(config.values, release="slurm", namespace="slurm")
    request = admit(pod(), kill_wait_seconds=30, default_user_id=settings.default_user_id)
    assert isinstance(request, PodRequest) and request.user_id == 1001
    assert request.group_id is None  # the group is the user id, as in SUNK
    assert run_as_users([_named(P_UID)], settings.default_user_id) == {P_UID: frozenset({"1001"})}


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ("scheduler:\n  podPolicy:\n    defaultUserId: 4294967295\n", "values.yaml:3"),
        ("scheduler:\n  podPolicy:\n    defaultUserId: -1\n", "values.yaml:3"),
        ("scheduler:\n  podPolicy:\n    allowedUserIds:\n      a: [4294967294]\n", "values.yaml:4"),
    ],
)
def test_a_uid_out_of_range_in_values_names_its_line_and_the_limit(values: str, where: str) -> None:
    with pytest.raises(ConfigTypeError) as err:
        config_from(values)
    [line, _hint] = str(err.value).splitlines()
    assert line.startswith(where) and "4294967293" in line, line


# ---- item 1, gangs: the members' node lists are held together ------------------------------


def _member_with_nodes(index: int, count: int) -> dict[str, Any]:
    """A member whose excluded-nodes names `count` nodes no other member names."""
    return pod(excluded_nodes=f"m{index}-[1-{count}]", user_id="1001")


def test_a_gang_cannot_add_up_its_members_node_lists_past_the_limit() -> None:
    """50 members at 40,000 names each (2,000,000 together, 150 MB) would be held at once to
    build the gang's job; the gang is refused once they pass 65,536, before the rest are
    expanded."""
    members = [_member_with_nodes(i, 40_000) for i in range(50)]
    admitted = (admit(p, kill_wait_seconds=30) for p in members)
    tracemalloc.start()
    result = capped_requests(r if isinstance(r, PodRequest) else None for r in admitted)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(result, Problem), "the members' node lists were all held"
    assert wk.ANNOTATION_EXCLUDED_NODES in str(result) and "65,536" in str(result)
    assert "80,000" in str(result), str(result)
    assert peak < 30_000_000, peak


def test_a_gang_within_the_limit_keeps_every_members_request() -> None:
    members = [_member_with_nodes(i, 1_000) for i in range(3)]
    result = capped_requests(admit(p, kill_wait_seconds=30) for p in members)  # type: ignore[misc]
    assert isinstance(result, list) and len(result) == 3
    assert capped_requests(iter([None])) is None  # a refused member: the gang waits
