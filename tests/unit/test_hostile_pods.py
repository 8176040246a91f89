"""Issue 31: what a Pod's author can write to hurt the daemon or gain the operator's powers.

Each test is the attack as written, and asserts what the author sees: the refusal that names
the annotation and the limit, or the policy's Deny.
"""

from __future__ import annotations

import dataclasses
import time
import tracemalloc
from typing import Any

import pytest

from reconciler import hostlists
from reconciler import wellknown as wk
from reconciler.adapters.slurm.model import SlurmJob
from reconciler.scheduler.admission import Rejection, admit
from reconciler.scheduler.gang import gang_key
from reconciler.scheduler.ownership import Claim, Ownership, run_as_users
from tests.unit.test_policy_pod_powers import pod
from tests.unit.test_scheduler_decide import slurm_job

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
