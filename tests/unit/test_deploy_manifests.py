"""deploy/ agrees with the code it runs: every setting in its config files is a real
`reconciler run` option with a valid value, and the Deployment runs the image the
Containerfile builds, by the tag it is built with, as the user that image declares.
(tests/integration/test_image.py builds and runs the image; tests/integration/test_deploy.py
checks the manifests against the API server.)"""

from __future__ import annotations

import re
import shutil
import tomllib
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from reconciler.cli import _subcommand, build_parser, main
from reconciler.cli.settings import layered_defaults
from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.power import VERBS, program_script, wait_prolog
from reconciler.config.files import read_library, read_repo
from reconciler.config.repo import load_config
from reconciler.scheduler.decide.placeholder import PLACEHOLDER_SCRIPT
from reconciler.scheduler.rbac import SCHEDULER_RULES

ROOT = Path(__file__).resolve().parents[2]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _deployment() -> dict[str, Any]:
    [deployment] = _docs(ROOT / "deploy/base/deployment.yaml")
    return deployment


@pytest.mark.parametrize(
    "settings", ["deploy/base/settings.yaml", "deploy/flux/settings-flux.yaml"]
)
def test_each_config_file_is_made_of_real_run_settings(settings: str, tmp_path: Path) -> None:
    [config_map] = _docs(ROOT / settings)
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    args = list(_deployment()["spec"]["template"]["spec"]["containers"][0]["args"])
    args[args.index("--config") + 1] = str(config)
    parser = build_parser()
    run = _subcommand(parser, "run")
    run.set_defaults(**layered_defaults(run, args, environ={}))
    parsed = parser.parse_args(args)
    assert parsed.leader_elect and parsed.log_format == "json"
    assert parsed.hooks_url.startswith("http://reconciler.slurm.svc:")
    assert bool(parsed.git_url) != bool(parsed.flux_git_repository)


SETTINGS = ["deploy/base/settings.yaml", "deploy/flux/settings-flux.yaml"]
Obj = dict[str, Any]


def _config_of(settings: str) -> dict[str, Any]:
    [config_map] = _docs(ROOT / settings)
    config: dict[str, Any] = yaml.safe_load(config_map["data"]["config.yaml"])
    return config


@cache
def _fixture_state() -> DesiredState:
    return compile_desired_state(load_config(read_repo(ROOT / "fixtures" / "config-repo"),
                                             read_library()))  # fmt: skip


def _fixture_render() -> tuple[Obj, ...]:
    """What the daemon applies for fixtures/config-repo: the Services deploy/ must name."""
    return _fixture_state().kube_objects


def _deploy_objects() -> list[Obj]:
    return [doc for path in sorted((ROOT / "deploy" / "base").glob("*.yaml"))
            for doc in _docs(path)]  # fmt: skip


def _containers_behind(url: str, objects: list[Obj] | tuple[Obj, ...]) -> list[str]:
    """The containers a cluster-DNS URL (`http://<service>.<namespace>.svc:<port>`) reaches:
    the Service of that name and port, then the workloads whose Pods its selector picks, and
    in them the containers that serve the port's target."""
    parts = urlsplit(url)
    name, namespace, svc = (parts.hostname or "").split(".")
    assert svc == "svc", url
    [service] = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == name
                 and o["metadata"].get("namespace") == namespace]  # fmt: skip
    ports = [p for p in service["spec"]["ports"] if p["port"] == parts.port]
    assert ports, f"{url}: Service {name} serves {[p['port'] for p in service['spec']['ports']]}"
    target = ports[0].get("targetPort", parts.port)
    selector = service["spec"]["selector"].items()
    reached = []
    for workload in objects:
        template = (workload.get("spec") or {}).get("template") or {}
        if not selector <= (template.get("metadata") or {}).get("labels", {}).items():
            continue
        for container in template["spec"]["containers"]:
            ports = container.get("ports", [])
            served = {v for p in ports for v in (p["containerPort"], p["name"])}
            if target in served:
                reached.append(container["name"])
    return reached


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_slurm_url_is_the_slurmrestd_service_the_repo_renders(settings: str) -> None:
    """deploy/ named `slurm-controller:6820`, a port the controller Service does not serve
    (slurmctld is 6817; slurmrestd is the rest Service's 6820): the deployed daemon could not
    reach Slurm. The URL is checked against the Services the fixture repo renders."""
    assert _containers_behind(_config_of(settings)["slurm-url"], _fixture_render()) == [
        "slurmrestd"
    ]


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_hooks_url_reaches_the_daemons_hooks_listener(settings: str) -> None:
    config = _config_of(settings)
    assert _containers_behind(config["hooks-url"], _deploy_objects()) == ["reconciler"]
    [port] = [p for p in _deployment()["spec"]["template"]["spec"]["containers"][0]["ports"]
              if p["name"] == "hooks"]  # fmt: skip
    assert config["hooks-api-bind-address"].rpartition(":")[2] == str(port["containerPort"])


def test_the_deployment_mounts_what_the_repo_renders_under_the_names_settings_read() -> None:
    """The JWT key Secret and slurm.conf ConfigMap the Deployment mounts are the rendered
    ones, and the files settings.yaml names are keys in them."""
    rendered = {(o["kind"], o["metadata"]["name"]): o for o in _fixture_render()}
    pod = _deployment()["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    config = _config_of("deploy/base/settings.yaml")
    secrets = {s.name: s.key for s in _fixture_state().secrets}
    for volume in pod["volumes"]:
        if "configMap" in volume and volume["name"] == "slurm-conf":
            data = rendered[("ConfigMap", volume["configMap"]["name"])]["data"]
            path = config["slurm-conf"]
        elif "secret" in volume and volume["name"] == "slurm-jwt":
            data = {secrets[volume["secret"]["secretName"]]: ""}
            path = config["slurm-jwt-key"]
        else:
            continue
        folder, _, key = path.rpartition("/")
        assert folder == mounts[volume["name"]] and key in data, (volume["name"], path)


def test_the_deployment_runs_the_containerfile_image_as_its_user() -> None:
    containerfile = (ROOT / "Containerfile").read_text()
    uid = re.search(r"^USER (\d+):(\d+)$", containerfile, re.M)
    assert uid and '["reconciler"]' in containerfile
    pod = _deployment()["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        int(uid[1]), int(uid[2]),
    )  # fmt: skip
    # git clones and gpg homes need a writable HOME on a read-only root filesystem.
    assert re.search(r"^ENV (.*\\\n)*.*\bHOME=/tmp\b", containerfile, re.M)
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert {"/tmp", "/var/lib/reconciler"} <= mounts
    for package in ("git", "gnupg"):
        assert re.search(rf"\b{package}\b", containerfile), package


def _max_unavailable(value: int | str, replicas: int) -> int:
    """rollingUpdate.maxUnavailable as the Deployment controller resolves it (a percentage
    rounds down)."""
    return value if isinstance(value, int) else int(value.rstrip("%")) * replicas // 100


def test_a_rollout_can_replace_the_leader_while_only_it_is_ready() -> None:
    """/readyz answers 200 on the leader only (so the Service routes hooks there). Under the
    default RollingUpdate (25% of 2: no Pod may be unavailable, one more may be made) a new
    image or `kubectl rollout restart` never finishes: the new Pod, a follower, never becomes
    ready, so the controller never removes the old leader. The old leader must be removable
    while no new Pod is ready."""
    spec = _deployment()["spec"]
    strategy = spec.get("strategy") or {"type": "RollingUpdate"}
    if strategy["type"] == "Recreate":
        return
    rolling = strategy.get("rollingUpdate") or {}
    unavailable = _max_unavailable(rolling.get("maxUnavailable", "25%"), spec["replicas"])
    assert spec["replicas"] - unavailable <= 0, "a rollout would wait for a follower to be ready"


def _arg_default(text: str, name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S+)$", text, re.M)
    assert found, f"no `ARG {name}=` default"
    return found[1].strip('"')


def test_the_image_tag_in_deploy_is_the_version_the_containerfile_labels() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    containerfile = (ROOT / "Containerfile").read_text()
    assert _arg_default(containerfile, "VERSION") == version
    assert f"podman build -t ghcr.io/sunk-reconciler/reconciler:{version} ." in containerfile
    [kustomization] = _docs(ROOT / "deploy/base/kustomization.yaml")
    assert kustomization["images"] == [
        {"name": "reconciler", "newName": "ghcr.io/sunk-reconciler/reconciler", "newTag": version}
    ]
    patch = (ROOT / "deploy/argocd/repo-server-patch.yaml").read_text()
    assert f"image: ghcr.io/sunk-reconciler/reconciler:{version}\n" in patch


@pytest.mark.parametrize("containerfile", ["Containerfile", "deploy/images/slurm/Containerfile"])
def test_the_image_builds_the_slurm_the_local_stack_tests(containerfile: str) -> None:
    """The images' Slurm is the Slurm the integration tests run: same release, same tarball
    (setup.sh builds it for the tests; the reconciler's Containerfile for its clients,
    deploy/images/slurm for the cluster's daemons)."""
    text = (ROOT / containerfile).read_text()
    setup = (ROOT / "tools/setup.sh").read_text()
    for name in ("SLURM_VERSION", "SLURM_SHA256"):
        assert _arg_default(text, name) == _arg_default(
            setup.replace("\nSLURM_", "\nARG SLURM_"), name
        ), name


def _final_stage_packages(containerfile: str) -> set[str]:
    """The Debian packages the shipped stage (the last FROM) installs."""
    final = containerfile.rsplit("\nFROM ", 1)[1].replace("\\\n", " ")
    installs = re.findall(r"apt-get install -y --no-install-recommends ([^&\n]+)", final)
    return {word for line in installs for word in line.split()}


# Programs the rendered scripts run that neither Debian's Essential set (sh, cat, sleep,
# grep) nor Slurm's build (scontrol) gives: the package that does.
PACKAGE_OF = {"curl": "curl"}


def test_the_slurm_image_has_the_programs_the_rendered_scripts_call() -> None:
    """The placeholder job (on slurmd) and the power programs (in slurmctld) call the hooks
    API with curl: the slurm image had none, so on our own images a job's end and power
    saving failed silently. tests/integration/test_images.py runs the scripts in the image."""
    scripts = [PLACEHOLDER_SCRIPT, *(program_script(verb, "/etc/slurm") for verb in VERBS),
               wait_prolog(60, "/etc/slurm", {})]  # fmt: skip
    packages = _final_stage_packages((ROOT / "deploy/images/slurm/Containerfile").read_text())
    called = {p for script in scripts for p in PACKAGE_OF if re.search(rf"\b{p} ", script)}
    assert called == {"curl"}
    for program in called:
        assert PACKAGE_OF[program] in packages, f"the slurm image does not install {program}"


def _containers() -> list[tuple[str, dict[str, Any]]]:
    """Every container (and init container) of every Pod template in deploy/, with its file."""
    found = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        for doc in _docs(path):
            pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
            for container in [*pod.get("containers", []), *pod.get("initContainers", [])]:
                found.append((f"{path.relative_to(ROOT)}: {container['name']}", container))
    return found


def test_every_container_in_deploy_is_bounded_and_locked_down() -> None:
    """The Argo CD plugin's sidecar ran without limits, so a config repo
    built to blow up `reconciler render` took the repo server's node's memory. Every
    container has a memory limit (and requests), and the daemon's lock-down."""
    containers = _containers()
    assert {name.split(": ")[1] for name, _ in containers} >= {"reconciler", "sunk-reconciler-cmp"}
    for name, container in containers:
        resources = container.get("resources") or {}
        assert (resources.get("limits") or {}).get("memory"), f"{name}: no memory limit"
        assert {"cpu", "memory"} <= set(resources.get("requests") or {}), f"{name}: requests"
        security = container.get("securityContext") or {}
        assert security.get("readOnlyRootFilesystem") is True, name
        assert security.get("allowPrivilegeEscalation") is False, name
        assert (security.get("capabilities") or {}).get("drop") == ["ALL"], name


def _roles() -> list[tuple[Path, Obj]]:
    return [(path, doc) for path in sorted((ROOT / "deploy").rglob("*.yaml"))
            for doc in _docs(path) if doc.get("kind") in ("Role", "ClusterRole")]  # fmt: skip


def test_nothing_cluster_wide_but_reads() -> None:
    """The ClusterRole granted `events create` in every namespace. Events
    on Pods are granted by the Role of each namespace the scheduler serves; Events on Nodes
    (kept in "default", as kubelet's) by a Role there. Cluster-wide: reads only, but for
    deploy/cluster-scope, which a repo with `scheduler.scope.type: cluster` asks for."""
    for path, role in _roles():
        if role["kind"] == "ClusterRole" and path.parent.name != "cluster-scope":
            verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
            assert verbs <= {"get", "list", "watch"}, (role["metadata"]["name"], verbs)
    events = {role["metadata"].get("namespace") for _, role in _roles()
              for rule in role["rules"] if "events" in rule["resources"]}  # fmt: skip
    assert events == {"default", "slurm", "inference", None}


def _rules(rules: list[Obj] | tuple[Obj, ...]) -> list[Obj]:
    return [{k: sorted(v) for k, v in rule.items()} for rule in rules]


def test_deploy_base_names_no_namespace_but_its_own() -> None:
    """deploy/base hard-coded `inference`, the fixture repo's tenant namespace, in a Namespace,
    a Role and the ClusterRole: a user's scope has other namespaces. Their RBAC is generated
    from the repo (`reconciler render-rbac`); deploy/base holds the release namespace and
    `default` (Node Events) only."""
    named = set()
    for path in sorted((ROOT / "deploy" / "base").glob("*.yaml")):
        for doc in _docs(path):
            named.add((doc.get("metadata") or {}).get("namespace"))
            if doc["kind"] == "Namespace":
                named.add(doc["metadata"]["name"])
            for rule in doc.get("rules") or ():
                if "namespaces" in rule["resources"]:
                    named.update(rule.get("resourceNames") or ["*"])
    assert named - {None} == {"slurm", "default"}
    [role] = [r for p, r in _roles() if p.name == "rbac.yaml" and r["kind"] == "Role"
              and r["metadata"]["name"] == "reconciler"]  # fmt: skip
    for rule in _rules(SCHEDULER_RULES):  # the release namespace's Pods are scheduled too
        assert rule in _rules(role["rules"]), rule


def _render_rbac(repo: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["render-rbac", str(repo)]) == 0
    return capsys.readouterr().out


def test_the_example_overlays_rbac_is_what_render_rbac_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = _render_rbac(ROOT / "fixtures" / "config-repo", capsys)
    committed = (ROOT / "deploy/example-namespace-scope/scheduler-rbac.yaml").read_text()
    assert committed == expected, "run the command in deploy/example-namespace-scope's comment"


def test_cluster_scope_is_what_render_rbac_prints_for_a_cluster_wide_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scope.type: cluster` had no ClusterRole in deploy/: the daemon's watch of every
    namespace's Pods was refused. deploy/cluster-scope grants exactly what the scheduler's
    namespace Roles grant, in every namespace, plus reading any Namespace."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "fixtures" / "config-repo", repo)
    values = (repo / "values.yaml").read_text()
    assert "\n    type: namespace\n" in values
    (repo / "values.yaml").write_text(values.replace("\n    type: namespace\n",
                                                     "\n    type: cluster\n"))  # fmt: skip
    rendered = [d for d in yaml.safe_load_all(_render_rbac(repo, capsys)) if d]
    assert _docs(ROOT / "deploy/cluster-scope/scheduler-clusterrole.yaml") == rendered
    [kustomization] = _docs(ROOT / "deploy/cluster-scope/kustomization.yaml")
    assert kustomization["resources"] == ["scheduler-clusterrole.yaml"]


def test_no_role_lets_the_daemon_change_a_pods_spec() -> None:
    """`patch` or `update` on pods would let a compromised daemon swap the image of any Pod
    it schedules (RBAC cannot narrow a patch to metadata). It writes annotations and the
    PodScheduled condition through pods/status, where the API server keeps the spec."""
    granted = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        for doc in _docs(path):
            if doc.get("kind") not in ("Role", "ClusterRole"):
                continue
            for rule in doc.get("rules") or ():
                resources = set(rule.get("resources") or ())
                verbs = set(rule.get("verbs") or ())
                if resources & {"pods", "*"} and verbs & {"patch", "update", "*"}:
                    granted.append(f"{path.relative_to(ROOT)}: {doc['metadata']['name']}")
    assert not granted, granted
