"""compute.pyxis -> plugstack.conf beside slurm.conf, enroot.conf at /etc/enroot, the slurmd
container's capabilities and volumes, and the credentials Secret by name only.

enroot itself is in no registry this project can reach, so enroot.conf is checked here against
enroot's documented variables (its conf/enroot.conf.in and doc/configuration.md), read the way
enroot reads the file: one `NAME value` per line, `#` comments."""

from __future__ import annotations

import re
from typing import Any

from reconciler.compile.desired import DesiredState
from reconciler.compile.yamlout import dump_stream

# Every variable enroot's conf/enroot.conf.in documents (enroot 3.x).
ENROOT_VARIABLES = frozenset({
    "ENROOT_LIBRARY_PATH", "ENROOT_SYSCONF_PATH", "ENROOT_RUNTIME_PATH", "ENROOT_CONFIG_PATH",
    "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH", "ENROOT_GZIP_PROGRAM",
    "ENROOT_ZSTD_OPTIONS", "ENROOT_SQUASH_OPTIONS", "ENROOT_ROOTFS_WRITABLE",
    "ENROOT_NATIVE_OVERLAYFS", "ENROOT_REMAP_ROOT", "ENROOT_UNSHARE_NET", "ENROOT_UNSHARE_UTS",
    "ENROOT_MAX_PROCESSORS", "ENROOT_MAX_CONNECTIONS", "ENROOT_CONNECT_TIMEOUT",
    "ENROOT_TRANSFER_TIMEOUT", "ENROOT_TRANSFER_RETRIES", "ENROOT_LOGIN_SHELL",
    "ENROOT_ALLOW_SUPERUSER", "ENROOT_ALLOW_HTTP", "ENROOT_BUNDLE_ALL", "ENROOT_BUNDLE_CHECKSUM",
    "ENROOT_MOUNT_HOME", "ENROOT_RESTRICT_DEV", "ENROOT_FORCE_OVERRIDE",
})  # fmt: skip
PATH_VARIABLES = ("ENROOT_RUNTIME_PATH", "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH",
                  "ENROOT_CONFIG_PATH")  # fmt: skip

NODE = "  nodes:\n    cpu: {definitions: [cpu-epyc], replicas: 1}\n"
SEED = "compute:\n  pyxis:\n    enabled: true\n" + NODE  # SUNK's "Enabling Pyxis"


def _objects(state: DesiredState, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in state.kube_objects if o["kind"] == kind}


def _pod(state: DesiredState) -> dict[str, Any]:
    spec: dict[str, Any] = _objects(state, "StatefulSet")["slurm-cpu"]["spec"]["template"]["spec"]
    return spec


def _enroot_settings(text: str) -> dict[str, str]:
    settings = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, value = line.strip().partition(" ")
        assert re.fullmatch(r"[A-Z_]+", name), line
        settings[name] = value.strip()
    return settings


def test_plugstack_conf_sits_beside_slurm_conf_with_pyxis_line(compile_values: Any) -> None:
    conf = _objects(compile_values(SEED), "ConfigMap")["slurm-slurm-conf"]["data"]
    assert set(conf) == {"slurm.conf", "gres.conf", "plugstack.conf"}
    lines = [x for x in conf["plugstack.conf"].splitlines() if not x.startswith("#")]
    assert lines == [
        "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis "
        "execute_entrypoint=0 container_scope=global sbatch_support=1"
    ]
    optional = compile_values(
        "compute:\n  pyxis: {enabled: true, required: false, pluginPath: /opt/p.so}\n" + NODE
    )
    text = _objects(optional, "ConfigMap")["slurm-slurm-conf"]["data"]["plugstack.conf"]
    assert "\noptional /opt/p.so runtime_path=/run/pyxis " in text


def test_pyxis_off_renders_nothing_of_it(compile_values: Any) -> None:
    state = compile_values("compute:\n  pyxis: {enabled: false}\n" + NODE)
    assert "plugstack.conf" not in _objects(state, "ConfigMap")["slurm-slurm-conf"]["data"]
    assert "slurm-enroot" not in _objects(state, "ConfigMap")
    rendered = dump_stream(list(state.kube_objects))
    assert "enroot" not in rendered and "SYS_ADMIN" not in rendered


def test_enroot_conf_uses_only_documented_variables_and_mount_home(compile_values: Any) -> None:
    for mount_home, expected in ((True, "yes"), (False, "no")):
        values = f"compute:\n  pyxis: {{enabled: true, mountHome: {str(mount_home).lower()}}}\n"
        state = compile_values(values + NODE)
        text = _objects(state, "ConfigMap")["slurm-enroot"]["data"]["enroot.conf"]
        settings = _enroot_settings(text)
        assert set(settings) <= ENROOT_VARIABLES, set(settings) - ENROOT_VARIABLES
        assert settings["ENROOT_MOUNT_HOME"] == expected
    # Runtime, cache, data and config on node paths the slurmd container mounts.
    mounts = {m["mountPath"] for m in _pod(state)["containers"][0]["volumeMounts"]}
    for name in PATH_VARIABLES:
        folder = settings[name].split("/user-")[0].split("/group-")[0]
        assert folder.startswith("/") and (folder in mounts or name == "ENROOT_CONFIG_PATH")
    assert "/etc/enroot/enroot.conf" in mounts


def test_capabilities_are_the_union_and_slurmd_only(compile_values: Any) -> None:
    values = (
        "compute:\n  securityContext:\n"
        "    capabilities: {add: [NET_ADMIN, SYS_ADMIN], drop: [MKNOD]}\n"
        "  pyxis: {enabled: true}\n"
    )
    pod = _pod(compile_values(values + NODE))
    security = pod["containers"][0]["securityContext"]
    assert security["capabilities"] == {"add": ["NET_ADMIN", "SYS_ADMIN", "SYS_NICE"],
                                        "drop": ["MKNOD"]}  # fmt: skip
    assert [c["name"] for c in pod["containers"]][1:] == ["munge"]  # only slurmd changed


def test_credentials_secret_is_mounted_by_name_never_read(compile_values: Any) -> None:
    values = "compute:\n  pyxis: {enabled: true, credentialsSecret: registry-logins}\n"
    state = compile_values(values + NODE)
    pod = _pod(state)
    volume = next(v for v in pod["volumes"] if v["name"] == "enroot-credentials")
    items = [{"key": ".credentials", "path": ".credentials"}]
    assert volume["secret"] == {
        "secretName": "registry-logins",
        "defaultMode": 0o444,
        "items": items,
    }
    mount = next(m for m in pod["containers"][0]["volumeMounts"]
                 if m["name"] == "enroot-credentials")  # fmt: skip
    enroot_conf = _objects(state, "ConfigMap")["slurm-enroot"]["data"]["enroot.conf"]
    config = _enroot_settings(enroot_conf)["ENROOT_CONFIG_PATH"]
    assert mount["mountPath"] == f"{config}/.credentials" and mount["readOnly"]
    assert not _objects(state, "Secret").get("registry-logins")  # the user's, not ours


def test_a_misspelt_pyxis_key_warns_with_the_nearest(compile_values: Any) -> None:
    state = compile_values("compute:\n  pyxis: {enabled: true, mounthome: true}\n" + NODE)
    assert any("compute.pyxis.mounthome" in str(w) and "mountHome" in str(w)
               for w in state.warnings), [str(w) for w in state.warnings]  # fmt: skip


def _localhost_profiles(objects: Any) -> list[str]:
    """Every Localhost seccomp profile the render names, anywhere in any object."""
    found: list[str] = []
    if isinstance(objects, dict):
        profile = objects.get("seccompProfile")
        if isinstance(profile, dict) and profile.get("type") == "Localhost":
            found.append(str(profile.get("localhostProfile")))
        for value in objects.values():
            found += _localhost_profiles(value)
    elif isinstance(objects, list):
        for value in objects:
            found += _localhost_profiles(value)
    return found


def test_no_localhost_seccomp_profile_unless_the_values_name_one(compile_values: Any) -> None:
    """Nothing ships `profiles/enroot`: on a Node without it every slurmd Pod would fail with
    CreateContainerError, so pyxis alone renders no Localhost profile."""
    state = compile_values(SEED)
    assert _localhost_profiles(list(state.kube_objects)) == []


def test_a_named_seccomp_profile_goes_on_the_slurmd_container_only(compile_values: Any) -> None:
    values = "compute:\n  pyxis: {enabled: true, seccompProfile: profiles/enroot.json}\n"
    pod = _pod(compile_values(values + NODE))
    assert "seccompProfile" not in (pod.get("securityContext") or {})  # munge, sssd: none
    slurmd, *others = pod["containers"]
    assert slurmd["securityContext"]["seccompProfile"] == {
        "type": "Localhost", "localhostProfile": "profiles/enroot.json"
    }  # fmt: skip
    assert others and all("seccompProfile" not in (c.get("securityContext") or {})
                          for c in others)  # fmt: skip


def test_pyxis_required_with_our_image_warns_naming_key_and_image(compile_values: Any) -> None:
    """Our image has no pyxis or enroot: a `required` pyxis line fails every srun."""
    state = compile_values(SEED)
    texts = [str(w) for w in state.warnings if "pyxis" in str(w)]
    assert any("compute.pyxis.required" in t and "ghcr.io/sunk-reconciler/slurm:24.11.5" in t
               and "cpu" in t for t in texts), texts  # fmt: skip


def test_pyxis_optional_or_another_image_does_not_warn(compile_values: Any) -> None:
    optional = compile_values("compute:\n  pyxis: {enabled: true, required: false}\n" + NODE)
    own = compile_values(
        SEED.replace(
            "replicas: 1}",
            "replicas: 1, image: {repository: example.com/slurmd-pyxis, tag: '1.0'}}",
        )
    )
    for state in (optional, own):
        assert not [str(w) for w in state.warnings if "has no pyxis" in str(w)]
