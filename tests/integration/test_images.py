"""The slurm image (deploy/images/slurm), built and run the way the render's Pods run it.

Built FROM Debian 12 made by debootstrap (no registry), exported, and run under chroot on a
read-only root in its own PID namespace (image_chroot.py), as the user the Pod's
securityContext gives each container, with the Pod's volumes as bind mounts (pod_parts.py).
test_images_accounting.py runs the mariadb image, and slurmdbd from this one against it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from reconciler import wellknown as wk
from reconciler.compile.power import AUTH_DIR, PROGRAMS_DIR, VERBS, program_script
from reconciler.compile.s6_services import S6Service, s6_config_map_data, s6_volume
from reconciler.local.ports import free_port
from reconciler.scheduler.decide.admission import PodRequest
from reconciler.scheduler.decide.placeholder import HookCredentials, placeholder_job_for
from tests.integration import image, image_chroot
from tests.integration.image_chroot import Exported
from tests.integration.pod_parts import (
    MUNGE_UID,
    MUNGED,
    NOBODY,
    SLURM_UID,
    empty_dir,
    munged,
    ok,
    secret_volume,
    slurm_etc,
)
from tests.integration.stand_ins import HooksStub

pytestmark = pytest.mark.image


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory, figures: dict[str, str]) -> Iterator[Exported]:
    yield from image_chroot.built_and_exported(image.build_slurm, tmp_path_factory, figures)


# ---- the slurm image ----------------------------------------------------------------------

DAEMONS = [  # (program and arguments, the user the render runs it as, what it answers)
    (["slurmctld", "-V"], SLURM_UID, "slurm 24.11.5"),
    (["slurmd", "-V"], "0:0", "slurm 24.11.5"),
    (["slurmrestd", "-V"], NOBODY, "slurm 24.11.5"),
    (["slurmdbd", "-V"], SLURM_UID, "slurm 24.11.5"),
    (["munged", "--version"], MUNGE_UID, "munge-0.5.15"),
    (["sssd", "--version"], "0:0", "2.8.2"),
]


@pytest.mark.parametrize(("args", "user", "answer"), DAEMONS, ids=[d[0][0] for d in DAEMONS])
def test_each_daemon_runs_from_the_image_as_its_user(
    slurm: Exported, args: list[str], user: str, answer: str, tmp_path: Path
) -> None:
    binds = {slurm_etc(tmp_path): "/etc/slurm"}
    assert answer in ok(slurm.run(*args, user=user, binds=binds))


def test_every_slurm_program_and_plugin_finds_its_libraries(slurm: Exported) -> None:
    clients = "srun sbatch salloc sinfo squeue scontrol scancel sacct sacctmgr sdiag sstat"
    daemons = "slurmctld slurmd slurmstepd slurmrestd slurmdbd"
    listing = ok(slurm.run("sh", "-c", f"""
        for p in {clients}; do echo "== $(command -v "$p" || echo "$p missing")"; done
        for p in {daemons}; do echo "== $(command -v "$p" || echo "$p missing")"; done
        for f in /usr/bin/s* /usr/sbin/slurm* /usr/lib/libslurm*.so* /usr/lib/slurm/*.so; do
          ldd "$f" 2>/dev/null | sed "s|^|$f: |"
        done""", entrypoint=False))  # fmt: skip
    assert "missing" not in listing
    assert "not found" not in listing, [ln for ln in listing.splitlines() if "not found" in ln]
    for program in clients.split():
        assert f"== /usr/bin/{program}\n" in listing
    for program in daemons.split():
        assert f"== /usr/sbin/{program}\n" in listing
    plugins = ok(slurm.run("ls", "/usr/lib/slurm", entrypoint=False)).split()
    for plugin in ("auth_jwt.so", "auth_munge.so", "accounting_storage_mysql.so",
                   "serializer_json.so", "serializer_yaml.so", "rest_auth_jwt.so",
                   "openapi_slurmctld.so", "openapi_slurmdbd.so", "cgroup_v2.so"):  # fmt: skip
        assert plugin in plugins


def test_the_clients_read_slurm_conf_from_etc_slurm(slurm: Exported, tmp_path: Path) -> None:
    binds = {slurm_etc(tmp_path): "/etc/slurm"}
    for client in ("srun", "sbatch", "sinfo", "squeue", "scontrol", "scancel", "sacct",
                   "sacctmgr", "sdiag"):  # fmt: skip
        assert ok(slurm.run(client, "--version", binds=binds, user=SLURM_UID)).strip() == (
            "slurm 24.11.5"
        ), client


def test_users_and_the_folders_the_daemons_write(slurm: Exported) -> None:
    passwd = ok(slurm.run("getent", "passwd", "slurm", "munge", entrypoint=False))
    assert "slurm:x:64030:64030:" in passwd
    assert "munge:x:64031:64031:" in passwd
    owners = {  # path: (uid, gid, mode)
        "/var/spool/slurmd": (0, 0, 0o755), "/run/sshd": (0, 0, 0o755),
        "/var/spool/slurmctld": (64030, 64030, 0o755), "/var/log/slurm": (64030, 64030, 0o755),
        "/run/slurmdbd": (64030, 64030, 0o755), "/run/munge": (64031, 64031, 0o755),
    }  # fmt: skip
    for path, expected in owners.items():
        st = (slurm.rootfs / path.lstrip("/")).stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == expected, path
    assert slurm.config.entrypoint == ["/usr/local/bin/sunk-init"]


def test_the_image_carries_no_key_every_pod_would_share(slurm: Exported) -> None:
    assert not (slurm.rootfs / "etc/munge/munge.key").exists()
    assert not list((slurm.rootfs / "etc/ssh").glob("ssh_host_*"))


def ssh_key(folder: Path, name: str) -> Path:
    folder.mkdir(exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)],
                   check=True, timeout=60)  # fmt: skip
    return folder / name


HOST_KEY = "/etc/ssh/keys/ssh_host_ed25519_key"


def test_sshd_takes_its_configuration_with_a_host_key_given(
    slurm: Exported, tmp_path: Path
) -> None:
    keys = ssh_key(tmp_path / "keys", "ssh_host_ed25519_key").parent
    ok(slurm.run("/usr/sbin/sshd", "-t", "-h", HOST_KEY, binds={keys: "/etc/ssh/keys"}))


def test_ssh_into_the_login_container_runs_the_slurm_clients(
    slurm: Exported, tmp_path: Path
) -> None:
    """sshd as the login Pod runs it (root's authorized_keys from a Secret, a host key given),
    on a private loopback port; with an emptyDir over /run/sshd it refuses every login."""
    keys = ssh_key(tmp_path / "keys", "ssh_host_ed25519_key").parent
    user_key = ssh_key(tmp_path / "user", "id_ed25519")
    authorized = tmp_path / "authorized_keys"
    authorized.write_text(user_key.with_suffix(".pub").read_text())
    authorized.chmod(0o600)
    binds = {keys: "/etc/ssh/keys", authorized: "/root/.ssh/authorized_keys",
             slurm_etc(tmp_path): "/etc/slurm"}  # fmt: skip

    port, log = free_port(), tmp_path / "sshd.log"
    args = ["/usr/sbin/sshd", "-D", "-e", "-p", str(port), "-h", HOST_KEY,
            "-o", "ListenAddress=127.0.0.1"]  # fmt: skip
    sshd = slurm.start(log, *args, binds=binds)
    try:
        deadline = time.monotonic() + 20
        while "Server listening" not in log.read_text():
            assert sshd.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        done = subprocess.run(
            ["ssh", "-i", str(user_key), "-p", str(port), "-o", "BatchMode=yes",
             "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "root@127.0.0.1", "sinfo", "--version"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        image_chroot.stop_in_chroot(sshd)
    ok(done)
    assert done.stdout == "slurm 24.11.5\n"
    refused = slurm.run(*args, binds=binds, volumes={"/run/sshd": empty_dir(tmp_path, "sshd")})
    assert refused.returncode != 0
    assert "/run/sshd must be owned by root and not group or world-writable" in refused.stderr


def test_munged_runs_as_munge_with_the_key_the_init_container_copied(
    slurm: Exported, tmp_path: Path
) -> None:
    """The contract's recipe (pod_parts.munge_init): the Secret (links, read-only) copied by a
    root init container to an emptyDir as munge's 0400 file; munged as munge; a client as slurm
    gets a credential. Without the init container handing both emptyDirs (0777) to munge,
    munged refuses each."""
    raw = tmp_path / "raw"
    raw.mkdir()
    volumes = {"/run/munge-key": empty_dir(raw, "key"), "/run/munge": empty_dir(raw, "sock")}
    key = secret_volume(raw, "secret", {"munge.key": secrets.token_bytes(1024)}, 0o400)
    ok(slurm.run("install", "-o", "munge", "-g", "munge", "-m", "0400",
                 "/etc/munge-key/munge.key", "/run/munge-key/munge.key",
                 binds={key: "/etc/munge-key"}, volumes=volumes))  # fmt: skip
    for folder in ("/run/munge-key", "/run/munge"):
        refused = slurm.run(*MUNGED, user=MUNGE_UID, volumes=volumes, timeout=30)
        assert refused.returncode != 0
        assert f'group-writable permissions without sticky bit set on "{folder}"' in (
            refused.stderr
        )
        ok(slurm.run("install", "-d", "-o", "munge", "-g", "munge", "-m", "0700", folder,
                     volumes=volumes))  # fmt: skip

    with munged(slurm, tmp_path) as socket_dir:
        decoded = ok(slurm.run("sh", "-c", "munge -n | unmunge", user=SLURM_UID,
                               volumes={"/run/munge": socket_dir}))  # fmt: skip
    assert re.search(r"^STATUS:\s+Success", decoded, re.M), decoded
    assert re.search(r"^UID:\s+slurm \(64030\)", decoded, re.M), decoded


# ---- the calls back to the reconciler's hooks API ------------------------------------------


@pytest.fixture
def hooks() -> Iterator[HooksStub]:
    """The hooks API the rendered scripts call, on loopback: every call answered `gone`."""
    stub = HooksStub(refuse_started=False)
    yield stub
    stub.close()


def test_slurmctlds_power_programs_reach_the_hooks_api_from_the_image(
    slurm: Exported, hooks: HooksStub, tmp_path: Path
) -> None:
    """SuspendProgram and ResumeProgram `exec curl`: run as slurmctld runs them (as slurm,
    with no PATH, the hostlist as $1), from the ConfigMap and Secret the controller Pod
    mounts. Without curl in the image, each exits 127 and no node powers up or down."""
    conf = "/etc/slurm"
    programs = tmp_path / "programs"
    programs.mkdir()
    for verb in VERBS:
        (programs / verb).write_text(program_script(verb, conf))
        (programs / verb).chmod(0o755)
    auth = secret_volume(tmp_path, "auth", {
        wk.POWER_SECRET_URL_KEY: hooks.url.encode(),
        wk.POWER_SECRET_HEADER_KEY: b"Authorization: Bearer power-token",
    }, 0o440)  # fmt: skip
    for item in (auth / "..data").resolve().iterdir():  # the Pod's fsGroup, as kubelet sets it
        os.chown(item, 0, int(SLURM_UID.split(":")[1]))
    binds = {programs: f"{conf}/{PROGRAMS_DIR}", auth: f"{conf}/{AUTH_DIR}"}
    for verb in VERBS:
        done = slurm.run("env", "-i", f"SLURM_CONF={conf}/slurm.conf",
                         f"{conf}/{PROGRAMS_DIR}/{verb}", "gpu-[0-1]",
                         user=SLURM_UID, binds=binds)  # fmt: skip
        assert done.returncode == 0, (verb, done.stderr)
    # curl escapes `[` as %5b, Python as %5B: the same URL (RFC 3986, 2.1).
    assert [(unquote(path), auth) for path, auth in hooks.requests] == [
        (f"{wk.HOOKS_POWER_PREFIX}{verb}?nodes=gpu-[0-1]", "Bearer power-token") for verb in VERBS
    ]


def _sleeping_under(pid: int) -> bool:
    """Whether a descendant of `pid` runs `sleep 3600`."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x003600\x00":
            return True
    except OSError:
        return False
    return any(_sleeping_under(int(child)) for child in children)


def test_a_placeholder_job_ended_by_slurm_calls_back_from_the_image(
    slurm: Exported, hooks: HooksStub, tmp_path: Path
) -> None:
    """The placeholder's script as slurmstepd runs it on a slurmd Pod (the job's environment
    as the scheduler submits it): on SIGTERM (scancel) it tells the hooks API, and exits
    once the answer is that the Pod is gone. Without curl it never hears `gone` and holds the
    allocation until Slurm kills it after KillWait."""
    key = secrets.token_bytes(32)
    pod = {"metadata": {"name": "p", "namespace": "inference", "uid": "c0ffee00-uid"}}
    job = placeholder_job_for(pod, PodRequest(cpus=1, memory_mb=1024, gpus=0, grace_seconds=5),
                              HookCredentials(hooks.url, key), scheduler="s")  # fmt: skip
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "slurm_script").write_text(job.script)
    (spool / "slurm_script").chmod(0o755)
    env = {**job.environment, "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "gpu-0"}
    log = tmp_path / "job.log"
    script = slurm.start(log, "/var/spool/job/slurm_script", user="1001:1001", env=env,
                         binds={spool: "/var/spool/job"})  # fmt: skip
    deadline = time.monotonic() + 30
    while not _sleeping_under(script.pid):  # its trap is set: it waits on `sleep 3600`
        assert script.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    rc = image_chroot.stop_in_chroot(script, grace=20)  # SIGTERM, as Slurm ends a job
    assert rc == 0, log.read_text()
    token = HookCredentials(hooks.url, key).token_for("c0ffee00-uid")
    assert hooks.requests == [
        ("/hooks/v1/pods/c0ffee00-uid/signalled?job=42&node=gpu-0", f"Bearer {token}")
    ]


# ---- sunk-init ----------------------------------------------------------------------------

ONESHOT_SCRIPT = """#!/usr/bin/env bash
echo "oneshot ran as $(id -u)" > /run/out/oneshot
"""
LONGRUN_SCRIPT = """#!/usr/bin/env bash
[ -e /run/out/oneshot ] && echo "after the oneshot: $$" >> /run/out/longrun
exec sleep 600
"""
# The container's program: it runs as PID 1 (sunk-init exec'd it), finds the oneshot done and
# the longrun running, kills the longrun and sees s6-supervise start it again.
PROGRAM = """
set -eu
echo "program pid $$"
cat /run/out/oneshot
for i in $(seq 100); do [ -s /run/out/longrun ] && break; sleep 0.1; done
first=$(head -1 /run/out/longrun); first=${first##* }
kill "$first"
for i in $(seq 100); do [ "$(wc -l < /run/out/longrun)" -ge 2 ] && break; sleep 0.1; done
echo "longrun starts: $(wc -l < /run/out/longrun)"
"""


def lay_out_config_map(services: list[S6Service], dest: Path) -> Path:
    """The `<release>-s6` ConfigMap's files where its volume's items put them (each service is
    a subPath mount of one of these folders, so its files are plain files)."""
    data = s6_config_map_data(services)
    for item in s6_volume("slurm", services)["configMap"]["items"]:
        path = dest / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]])
        path.chmod(item.get("mode", 0o644))
    return dest


def test_sunk_init_runs_the_rendered_oneshot_supervises_the_longrun_then_execs(
    slurm: Exported, tmp_path: Path
) -> None:
    services = [S6Service("motd", "oneshot", ONESHOT_SCRIPT),
                S6Service("ticker", "longrun", LONGRUN_SCRIPT)]  # fmt: skip
    tree = lay_out_config_map(services, tmp_path / "s6")
    out = empty_dir(tmp_path, "out")
    done = ok(slurm.run(
        "bash", "-c", PROGRAM, binds={tree: "/etc/s6-overlay"},
        volumes={"/run/out": out, "/run/service": empty_dir(tmp_path, "service")},
    ))  # fmt: skip
    assert "program pid 1\n" in done  # exec'd: the program gets the container's signals
    assert "oneshot ran as 0\n" in done
    assert "longrun starts: 2\n" in done  # s6-supervise ran it again
    assert (out / "longrun").read_text().startswith("after the oneshot: ")


def test_sunk_init_runs_oneshots_after_their_dependencies(slurm: Exported, tmp_path: Path) -> None:
    """s6-rc's order, not the names': `a-second` depends on `z-first`."""
    tree = tmp_path / "s6"
    for name, needs in (("z-first", "base"), ("a-second", "z-first")):
        folder = tree / "s6-rc.d" / name
        (folder / "dependencies.d").mkdir(parents=True)
        (folder / "dependencies.d" / needs).touch()
        (folder / "type").write_text("oneshot\n")
        (folder / "up").write_text(f"/etc/s6-overlay/scripts/{name}\n")
        script = tree / "scripts" / name
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!/bin/sh\necho {name} >> /run/out/order\n")
        script.chmod(0o755)
        (tree / "s6-rc.d/user/contents.d").mkdir(parents=True, exist_ok=True)
        (tree / "s6-rc.d/user/contents.d" / name).touch()
    out = empty_dir(tmp_path, "out")
    ok(slurm.run("true", binds={tree: "/etc/s6-overlay"}, volumes={"/run/out": out}))
    assert (out / "order").read_text() == "z-first\na-second\n"


def test_sunk_init_without_services_only_execs(slurm: Exported) -> None:
    done = slurm.run("sh", "-c", 'echo "pid $$"; exit 7')
    assert (done.returncode, done.stdout, done.stderr) == (7, "pid 1\n", "")


def test_sunk_init_names_a_service_it_cannot_order(slurm: Exported, tmp_path: Path) -> None:
    tree = tmp_path / "s6"
    (tree / "s6-rc.d/lost/dependencies.d").mkdir(parents=True)
    (tree / "s6-rc.d/lost/dependencies.d/nowhere").touch()
    (tree / "s6-rc.d/lost/type").write_text("oneshot\n")
    (tree / "s6-rc.d/user/contents.d").mkdir(parents=True)
    (tree / "s6-rc.d/user/contents.d/lost").touch()
    done = slurm.run("true", binds={tree: "/etc/s6-overlay"})
    assert done.returncode != 0
    assert "s6 service lost depends on nowhere" in done.stderr


# ---- handing the images to containerd -----------------------------------------------------


def test_an_image_saved_as_an_oci_archive_names_its_whole_tag(
    slurm: Exported, tmp_path: Path
) -> None:
    archive = image.save_oci_archive(slurm.built.tag, tmp_path / "slurm.tar")
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
    [manifest] = index["manifests"]
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    # What `ctr images import` names the image by.
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == slurm.built.tag
