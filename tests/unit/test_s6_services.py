"""compute.s6 -> an s6-rc source tree in the slurmd container: the example of SUNK's "Slurm Workload
Manager" page compiled, then its volumes laid out by the local stack's materializer as kubelet
would, and read back as the tree s6-overlay compiles (type, up or run, dependencies.d/base,
user/contents.d)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from reconciler.compile.desired import DesiredState
from reconciler.errors import ConfigTypeError
from reconciler.local.agent.volumes import HostLayout, Materializer, pod_mounts

# SUNK's "Slurm Workload Manager" page, "Running Scripts with s6", with one node definition to mount
# it on.
PAGE_S6 = """
compute:
  s6:
    packages:
      type: oneshot
      script: |
        #!/usr/bin/env bash
        apt -y install nginx
    nginx:
      type: longrun
      script: |
        #!/usr/bin/env bash
        nginx -g "daemon off;"
  nodes:
    cpu:
      definitions: [cpu-epyc]
      replicas: 1
"""


def _by_kind(state: DesiredState, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in state.kube_objects if o["kind"] == kind}


def _slurmd_pod(state: DesiredState) -> dict[str, Any]:
    template = _by_kind(state, "StatefulSet")["slurm-cpu"]["spec"]["template"]
    return {"metadata": {"name": "slurm-cpu-0", "namespace": "slurm"}, "spec": template["spec"]}


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(root)): (p.read_text(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_the_page_example_is_an_s6_rc_source_tree_in_the_container(
    compile_values: Any, tmp_path: Path
) -> None:
    state = compile_values(PAGE_S6)
    maps = _by_kind(state, "ConfigMap")
    files = Materializer(
        HostLayout({}, tmp_path),
        lambda kind, _ns, name: maps.get(name) if kind == "ConfigMap" else None,
    )
    pod = _slurmd_pod(state)
    s6_mounts = [m for m in pod["spec"]["containers"][0]["volumeMounts"]
                 if m["name"] == "s6-services"]  # fmt: skip
    for mount in pod_mounts(pod, ["slurmd"]):
        if mount.volume == "s6-services":
            files.mount(pod, mount)
    root = tmp_path / "slurm_slurm-cpu-0/etc/s6-overlay"
    script = "#!/usr/bin/env bash\napt -y install nginx\n"
    assert _tree(root) == {
        "s6-rc.d/nginx/dependencies.d/base": ("", 0o644),
        "s6-rc.d/nginx/dependencies.d/packages": ("", 0o644),  # after the oneshot installs it
        "s6-rc.d/nginx/run": ('#!/usr/bin/env bash\nnginx -g "daemon off;"\n', 0o755),
        "s6-rc.d/nginx/type": ("longrun\n", 0o644),
        "s6-rc.d/packages/dependencies.d/base": ("", 0o644),
        "s6-rc.d/packages/type": ("oneshot\n", 0o644),
        "s6-rc.d/packages/up": ("/etc/s6-overlay/scripts/packages\n", 0o644),
        "s6-rc.d/user/contents.d/nginx": ("", 0o644),
        "s6-rc.d/user/contents.d/packages": ("", 0o644),
        "scripts/packages": (script, 0o755),
    }
    # Each service mounted on its own: the image's other services in s6-rc.d stay visible.
    assert all(m.get("subPath") and m.get("readOnly") for m in s6_mounts)
    assert "/etc/s6-overlay/s6-rc.d" not in {m["mountPath"] for m in s6_mounts}


def test_no_s6_values_no_config_map_and_no_mounts(compile_values: Any) -> None:
    state = compile_values("compute: {nodes: {cpu: {definitions: [cpu-epyc], replicas: 1}}}")
    assert "slurm-s6" not in _by_kind(state, "ConfigMap")
    spec = _slurmd_pod(state)["spec"]
    assert "s6-services" not in {v["name"] for v in spec["volumes"]}


@pytest.mark.parametrize("name", ["user", "base", "s6rc-oneshot-runner", "has.dot", "-x", "a/b"])
def test_a_name_s6_rc_cannot_take_is_refused_where_it_is_written(
    compile_values: Any, name: str
) -> None:
    with pytest.raises(ConfigTypeError, match="cannot name an s6 service") as raised:
        compile_values(f"compute:\n  s6:\n    '{name}': {{type: oneshot, script: 'true'}}\n")
    assert "values.yaml:3" in str(raised.value.where)
