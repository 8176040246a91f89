"""A scheduler that trusts no one, end to end: it believes neither a job's name, nor a hook's
caller, nor one bad answer, on the real local stack (kube-apiserver, slurmctld, slurmd, slurmrestd).

The scheduler under test reaches slurmrestd through a SlurmProxy (which can answer in its place:
a 200 without `jobs`, a 504 as while slurmctld is stopped) and Kubernetes through a kube-apiserver
of its own on the stack's etcd (which can be stopped: an API server outage). Spoofed jobs are
real `sbatch -J` jobs, as root and as another Slurm user.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import SlurmRestApi
from reconciler.adapters.slurm.transport import Transport
from reconciler.local.slurm.cluster import SlurmCluster, current_user
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.loop import PodScheduler
from reconciler.scheduler.settings import settings_from_values
from tests.integration.helpers import unique, wait_for
from tests.integration.local_up import RunningUp, local_up
from tests.integration.stand_ins import SlurmProxy, SpareApiServer
from tests.integration.test_scheduler import (
    FIXTURE_REPO,
    NAMESPACE,
    _create,
    _events,
    _job_id,
    _job_state,
    _jobs_for,
    _pod,
    _pod_spec,
    _submit_plain,
    _wait_bound,
    _wait_gone,
)

pytestmark = pytest.mark.integration

POLL = 1.0
OTHER = "slurm-other-scheduler"
SUNK_PODS_UID = 1001  # a Slurm user other than the operator (root), on every node
# What slurmrestd 24.11 answers a submit while slurmctld is stopped (captured).
SOCKET_TIMED_OUT = (504, {"errors": [{
    "description": "Batch job submission failed", "error_number": 5004,
    "error": "Socket timed out on send/recv operation", "source": "slurm_submit_batch_job()",
}], "warnings": []})  # fmt: skip
CONTROLLER_DOWN = (500, {"errors": [{
    "description": "Batch job submission failed", "error_number": 1800,
    "error": "Unable to contact slurm controller (connect failure)",
    "source": "slurm_submit_batch_job()",
}], "warnings": []})  # fmt: skip


@dataclass
class Env:
    running: RunningUp
    kube: Kube  # straight to the API server: the test's own view
    api: SlurmRestApi  # straight to slurmrestd
    scheduler: PodScheduler  # through the stand-ins
    slurm_proxy: SlurmProxy
    apiserver: SpareApiServer  # the scheduler's
    new_scheduler: Callable[..., PodScheduler]  # straight to both, with settings overrides
    restart: Callable[[], None]  # `scheduler` stopped and started again, through the stand-ins

    @property
    def slurm(self) -> SlurmCluster:
        return self.running.slurm


@pytest.fixture(scope="module")
def env(stack_timings: dict[str, float]) -> Iterator[Env]:
    work = Path(tempfile.mkdtemp(prefix="sunk-reconciler-trust-work-"))
    work.chmod(0o755)
    repo = work / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    try:
        with local_up(
            repo, work / "up.log", prefix="sunk-reconciler-trust-", timings=stack_timings,
            label="scheduler trust tests",
        ) as running:  # fmt: skip
            yield from _with_scheduler(running, repo, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _with_scheduler(running: RunningUp, repo: Path, work: Path) -> Iterator[Env]:
    slurm = running.stack.slurm
    assert slurm is not None
    kube = Kube.from_kubeconfig(running.stack.kube_paths.kubeconfig)
    apiserver = SpareApiServer(running.stack, work / "spare-apiserver.log")
    apiserver.start()
    slurm_proxy = SlurmProxy(slurm.rest_url())
    values = yaml.safe_load((repo / "values.yaml").read_text())
    settings = settings_from_values(
        values, release="slurm", namespace=NAMESPACE, hooks_host="127.0.0.1", hooks_port=0,
        poll_seconds=POLL,
    )  # fmt: skip
    key = slurm.paths.jwt_key
    tokens = MintedTokens(key, current_user())
    clients = [
        SlurmClients(url, tokens, jwt_key=key) for url in (slurm_proxy.url, slurm.rest_url())
    ]
    spare_kube = Kube.from_kubeconfig(apiserver.kubeconfig(work / "spare-kubeconfig"))

    def new_scheduler(**overrides: Any) -> PodScheduler:
        scheduler = PodScheduler(kube, clients[1], replace(settings, **overrides))
        scheduler.start()
        return scheduler

    scheduler = PodScheduler(spare_kube, clients[0], settings)
    scheduler.start()
    api = connect(slurm.rest_url(), MintedTokens(key, current_user()))

    def restart() -> None:
        """Its start reads Slurm's whole job list, which a steady state never does. On the
        same hooks port: the running jobs' scripts call the URL they were given, as they
        call a cluster's Service."""
        assert env.scheduler.hooks is not None
        port = env.scheduler.hooks.port
        env.scheduler.stop()
        env.scheduler = PodScheduler(spare_kube, clients[0], replace(settings, hooks_port=port))
        env.scheduler.start()

    env = Env(running, kube, api, scheduler, slurm_proxy, apiserver, new_scheduler, restart)
    try:
        yield env
    finally:
        env.scheduler.stop()
        for client in clients:
            client.close()
        api.close()
        slurm_proxy.close()
        apiserver.stop()


# ---- helpers ------------------------------------------------------------------------------


def _small(name: str, **extra: Any) -> dict[str, Any]:
    return _pod_spec(name, cpu="100m", memory="64Mi", **extra)


def _sbatch(env: Env, *args: str, uid: int | None = None) -> int:
    """A real job, as root or (uid) another Slurm user."""
    argv = ["sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *args]
    if uid is not None:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    out = subprocess.run(argv, env=env.slurm.env(), capture_output=True, text=True, check=True)
    return int(out.stdout.strip().split(";")[0])


def _job_name(env: Env, job_id: int) -> str:
    job = env.api.job(job_id)
    assert job is not None
    return job.name


def _polls(seconds: float = 4 * POLL + 1) -> None:
    """Several of the scheduler's polls."""
    time.sleep(seconds)


def _hook(env: Env, uid: str, kind: str, job_id: int, node: str) -> str:
    """A hook call as a placeholder script makes it, with the Pod's own token (which the job's
    user can read from the job's environment)."""
    credentials = env.scheduler.credentials
    assert credentials is not None
    url = f"{credentials.url}{wk.HOOKS_PATH_PREFIX}{uid}/{kind}?job={job_id}&node={node}"
    request = urllib.request.Request(url, method="POST", headers={
        "Authorization": f"Bearer {credentials.token_for(uid)}"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=15) as answer:
        return answer.read().decode().strip()


def _waiting_pod(env: Env, pods: list[str], plain_jobs: list[int]) -> tuple[str, str, int]:
    """A Pod whose job waits in Slurm: its only allowed node is held by a plain job."""
    _submit_plain(env, plain_jobs, required_nodes="slurm-cpu-0", shared="none")
    name = unique("waiting")
    uid = _create(env, pods, _small(name, annotations={
        wk.ANNOTATION_REQUIRED_NODES: "slurm-cpu-0", wk.ANNOTATION_EXCLUSIVE: "none",
    }))["metadata"]["uid"]  # fmt: skip
    job_id = wait_for(lambda: _recorded_job(env, name), 30, "the waiting Pod's job")
    assert _job_state(env, job_id) == "PENDING"
    return name, uid, job_id


def _recorded_job(env: Env, name: str) -> int | None:
    raw = ((_pod(env, name) or {}).get("metadata", {}).get("annotations") or {}).get(
        wk.ANNOTATION_JOB_ID
    )
    return int(raw) if raw else None


def _live_named(env: Env, text: str) -> list[int]:
    """Live jobs whose name holds `text` (a gang's group, say)."""
    live = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
    return [j.job_id for j in env.api.jobs().items if text in j.name and j.state in live]


def _live_jobs_for(env: Env, uid: str) -> list[int]:
    live = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
    return [j.job_id for j in _jobs_for(env, uid) if j.state in live]


# ---- 1. spoofed placeholder jobs -----------------------------------------------------------


@pytest.mark.parametrize("who", ["root", "another-user"])
def test_a_held_look_alike_of_a_pods_job_neither_deletes_the_pod_nor_is_cancelled(
    env: Env, pods: list[str], plain_jobs: list[int], who: str
) -> None:
    """`sbatch -J <the Pod's job name> --hold`, or `-J pod:ns/name@<uid>`: a newer
    PENDING job of that name read as the Pod's job "requeued", and the Pod was deleted."""
    name = unique("spoofed")
    pod = _wait_bound(env, _create(env, pods, _small(name))["metadata"]["name"])
    job_id, uid = _job_id(pod), pod["metadata"]["uid"]
    uid_arg = None if who == "root" else SUNK_PODS_UID
    spoofs = [
        _sbatch(env, "-J", label, "--hold", "--wrap", "true", uid=uid_arg)
        for label in (_job_name(env, job_id), f"pod:{NAMESPACE}/{name}@{uid}")
    ]
    plain_jobs.extend(spoofs)
    _polls()
    env.restart()  # on v0.0.40+ only a whole list (a start, a gap) shows the look-alikes
    _polls()
    still = _pod(env, name)
    assert still is not None and not still["metadata"].get("deletionTimestamp"), _events(env, name)
    assert _job_state(env, job_id) == "RUNNING"
    assert [_job_state(env, s) for s in spoofs] == ["PENDING", "PENDING"], "not ours to cancel"


def test_another_schedulers_gang_job_is_never_cancelled(env: Env, pods: list[str]) -> None:
    """Two schedulers on one Slurm: ours saw the other's gang job, no member of its own, and
    cancelled it without asking the API server."""
    other = env.new_scheduler(name=OTHER, aliases=())  # not the release's default names too
    group = unique("their-gang")
    names = [f"{group}-{i}" for i in range(2)]
    annotations = {wk.ANNOTATION_POD_GROUP: group, wk.ANNOTATION_POD_GROUP_MIN_MEMBER: "2"}
    try:
        for member in names:
            _create(env, pods, _small(member, annotations=annotations, schedulerName=OTHER))
        job_id = _job_id(_wait_bound(env, names[0], 30))
        _polls()
        assert _job_state(env, job_id) == "RUNNING"
        assert all((_pod(env, n) or {}).get("spec", {}).get("nodeName") for n in names)
    finally:
        for member in names:
            env.kube.delete("v1", "Pod", member, NAMESPACE, grace_period_seconds=0)
        wait_for(lambda: not _live_named(env, group), 30, "the other scheduler to end its job")
        other.stop()


# ---- 2. hook calls are checked against Slurm ----------------------------------------------


def test_a_forged_started_call_does_not_bind_a_pod_to_a_node_slurm_never_gave_it(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    name, uid, job_id = _waiting_pod(env, pods, plain_jobs)
    assert _hook(env, uid, "started", job_id, "slurm-gpu-small-0") == "ok"
    _polls(2 * POLL + 1)
    pod = _pod(env, name)
    assert pod is not None and not pod["spec"].get("nodeName"), "bound where Slurm put no job"
    assert _job_state(env, job_id) == "PENDING"


def test_a_forged_call_naming_another_job_never_gets_that_job_cancelled(
    env: Env, pods: list[str], plain_jobs: list[int]
) -> None:
    """The token's holder names someone's running job: the Pod was bound to it, and its delete
    cancelled that job with the operator's token."""
    name, uid, _ = _waiting_pod(env, pods, plain_jobs)
    victim = _submit_plain(env, plain_jobs, required_nodes="slurm-gpu-small-1")
    wait_for(lambda: _job_state(env, victim) == "RUNNING", 20, "the victim job to run")
    _hook(env, uid, "started", victim, "slurm-gpu-small-1")
    _polls(2 * POLL + 1)
    assert not (_pod(env, name) or {}).get("spec", {}).get("nodeName")
    env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
    _wait_gone(env, name)
    _polls()
    assert _job_state(env, victim) == "RUNNING"


# ---- 3. one bad listing -------------------------------------------------------------------

BAD_LISTINGS = {
    "no-jobs-key": (200, {"errors": [], "warnings": [], "last_update": {"number": 1}}),
    "not-an-object": (200, []),
    "empty-list": (200, {"jobs": [], "errors": [], "warnings": [],
                         "last_update": {"set": True, "infinite": False, "number": 1}}),
    "server-error": (500, {"errors": [{"error_number": 5004, "error": "Socket timed out"}]}),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_LISTINGS))
def test_one_bad_job_list_deletes_no_pod(env: Env, pods: list[str], case: str) -> None:
    names = [unique(f"listed-{i}") for i in range(2)]
    for name in names:
        _create(env, pods, _small(name))
    jobs = [_job_id(_wait_bound(env, name)) for name in names]
    answer = BAD_LISTINGS[case]
    jobs_path = f"/slurm/{env.api.api_version}/jobs"
    lists = (jobs_path, f"{jobs_path}/state/")  # the whole list, and the state list (v0.0.40+)
    env.slurm_proxy.intercept = lambda method, path: answer if path in lists else None
    try:
        _polls()
    finally:
        env.slurm_proxy.intercept = lambda method, path: None
    _polls(2 * POLL)
    for name in names:
        pod = _pod(env, name)
        assert pod is not None and not pod["metadata"].get("deletionTimestamp"), _events(env, name)
    assert [_job_state(env, j) for j in jobs] == ["RUNNING", "RUNNING"]


# ---- 4. transient errors are retried ------------------------------------------------------


def test_a_submit_refused_while_slurmctld_restarts_is_retried_not_refused(
    env: Env, pods: list[str]
) -> None:
    """A restart (which apply does) answers with 5004 or 1800: no verdict on the job."""
    answers = [SOCKET_TIMED_OUT, CONTROLLER_DOWN, SOCKET_TIMED_OUT]
    submit = f"/slurm/{env.api.api_version}/job/submit"

    def restarting(method: str, path: str) -> tuple[int, Any] | None:
        return answers.pop(0) if path == submit and answers else None

    env.slurm_proxy.intercept = restarting
    try:
        name = unique("restart")
        _create(env, pods, _small(name))
        pod = _wait_bound(env, name, 30)
    finally:
        env.slurm_proxy.intercept = lambda method, path: None
    assert not answers, "every transient error was met"
    assert not _events(env, name, wk.EVENT_REJECTED)
    assert _job_state(env, _job_id(pod)) == "RUNNING"


# ---- 5. a submit that timed out after slurmctld took it -------------------------------------


def test_a_submit_that_timed_out_after_slurmctld_took_it_leaves_one_job(
    env: Env, pods: list[str]
) -> None:
    """slurmctld stopped (SIGSTOP) while a submit waits: slurmrestd gives up after its
    timeout (504, 5004), then slurmctld resumes and makes the job all the same."""
    record = env.running.stack.supervisor.running("slurmctld")
    assert record is not None
    name = unique("timed-out")
    before = len(env.slurm_proxy.seen)
    os.kill(record.pid, signal.SIGSTOP)
    try:
        uid = _create(env, pods, _small(name))["metadata"]["uid"]
        submit = f"/slurm/{env.api.api_version}/job/submit"
        seen = env.slurm_proxy.seen
        wait_for(lambda: any(p == submit and s >= 500 for _, p, s in seen[before:]), 30,
                 "a submit to time out")  # fmt: skip
        time.sleep(3 * POLL)  # the scheduler's retries, while slurmctld still sleeps
    finally:
        os.kill(record.pid, signal.SIGCONT)
    _wait_bound(env, name, 60)
    _polls()
    assert len(_live_jobs_for(env, uid)) == 1, _jobs_for(env, uid)
    assert not _events(env, name, wk.EVENT_REJECTED)


def test_a_second_job_of_ours_for_a_pod_is_cancelled_and_the_first_kept(
    env: Env, pods: list[str]
) -> None:
    """A duplicate as a timed-out submit leaves it: submitted by the operator, named and
    admin-commented as the Pod's placeholder. The Pod keeps its job; the extra is cancelled
    once a whole job list shows it: after the timed-out submit (test above), at a start (here)
    or after a gap; a steady state reads only the jobs it knows (whole lists load slurmctld)."""
    name = unique("duplicated")
    pod = _wait_bound(env, _create(env, pods, _small(name))["metadata"]["name"])
    job_id, uid = _job_id(pod), pod["metadata"]["uid"]
    label = _job_name(env, job_id)
    slurm = env.running.slurm
    operator = Transport(slurm.rest_url(), MintedTokens(slurm.paths.jwt_key, current_user()),
                         timeout=30)  # fmt: skip
    body = {"script": "#!/bin/sh\nsleep 600\n", "job": {
        "name": label, "admin_comment": label, "environment": ["PATH=/bin:/usr/bin"],
        "current_working_directory": "/tmp", "standard_output": "/dev/null",
        "cpus_per_task": 1, "memory_per_node": {"set": True, "number": 64},
    }}  # fmt: skip
    try:
        answer = operator.request("POST", f"/slurm/{env.api.api_version}/job/submit", json=body)
    finally:
        operator.close()
    extra = int(answer.body["job_id"])
    env.restart()
    wait_for(lambda: _job_state(env, extra) in ("CANCELLED", "COMPLETED"), 20,
             "the extra job to be cancelled")  # fmt: skip
    assert _pod(env, name) is not None
    assert _job_state(env, job_id) == "RUNNING"
    assert _live_jobs_for(env, uid) == [job_id]


# ---- 10. an API server outage longer than etcd compaction -----------------------------------


def test_a_pod_deleted_during_an_api_server_outage_releases_its_job(
    env: Env, pods: list[str]
) -> None:
    """The scheduler's watch comes back after an outage with a resourceVersion compacted away
    (410): its relist must report the Pod deleted meanwhile as deleted. Its loops, which made
    a watch a second while the API server was away, keep one each after it."""
    name = unique("outage")
    job_id = _job_id(_wait_bound(env, _create(env, pods, _small(name))["metadata"]["name"]))
    watches = _open_watches(env)
    env.apiserver.stop()
    try:
        env.kube.delete("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
        _wait_gone(env, name)
        time.sleep(2)
        assert _job_state(env, job_id) == "RUNNING", "nobody watches: the job runs on"
    finally:
        env.apiserver.start()  # its watch cache starts after the delete: the watch gets 410
    wait_for(lambda: _job_state(env, job_id) in ("CANCELLED", "COMPLETED"), 40,
             "the deleted Pod's job to end")  # fmt: skip
    assert _open_watches(env) == watches


def _open_watches(env: Env) -> dict[str, int]:
    sizes = env.scheduler.retained()
    return {key: sizes[key] for key in ("watches", "placed watches")}


# ---- 11. integers a Pod's author writes -----------------------------------------------------

HUGE = "9" * 4301  # one digit past CPython's int-from-str limit (int() raised ValueError)


def test_integer_annotations_of_4301_digits_are_refused_and_blind_nothing(
    env: Env, pods: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A user-id of 4,301 digits stayed in the scheduler's cache, and on 22.05 every read of
    all Pods' users (each job poll, each hook) raised: no Pod was bound again. A timeout or a
    gang size of 4,301 digits logged a traceback on every retry. Each is refused with an Event
    naming its annotation and the value's length; a plain Pod made after them is bound and
    its hooks are answered."""
    hostile = {
        "user-id": {wk.ANNOTATION_USER_ID: HUGE},
        "timeout": {wk.ANNOTATION_TIMEOUT: HUGE},
        "pod-group-min-member": {
            wk.ANNOTATION_POD_GROUP: unique("huge-gang"), wk.ANNOTATION_POD_GROUP_MIN_MEMBER: HUGE,
        },
    }  # fmt: skip
    with caplog.at_level(logging.INFO, logger="reconciler.scheduler"):
        names = {}
        for said, annotations in hostile.items():
            names[said] = unique("huge-int")
            _create(env, pods, _small(names[said], annotations=annotations))
        for said, name in names.items():
            wait_for(lambda n=name, s=said: _refused_naming(env, n, s), 30,
                     f"{name} to be refused naming {said}: {_events(env, name)}")  # fmt: skip
        _polls()  # the hostile Pods stay in the cache while the polls run
        name = unique("after-huge")
        pod = _wait_bound(env, _create(env, pods, _small(name))["metadata"]["name"], 30)
        job_id, uid = _job_id(pod), pod["metadata"]["uid"]
        job = env.api.job(job_id)
        assert job is not None and job.state == "RUNNING"
        assert _hook(env, uid, "started", job_id, job.nodes) == "ok"
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]
    assert not tracebacks, tracebacks
    assert not [r for r in caplog.records if HUGE in r.getMessage()], "a log line echoed it"


def _refused_naming(env: Env, name: str, said: str) -> bool:
    return any(
        said in e.get("message", "") and "4,301 characters" in e.get("message", "")
        and HUGE not in e.get("message", "")
        for e in _events(env, name, wk.EVENT_REJECTED)
    )  # fmt: skip
