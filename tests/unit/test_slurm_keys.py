"""slurm.conf keys per Slurm release: what we render follows the release (ExclusiveTopo becomes
Exclusive=TOPO on 26.05), and the plan warns where a user's extraConfig or compute.partitions
writes a key the target release renamed, deprecated or removed, naming key, release and
replacement."""

from __future__ import annotations

from reconciler.compile.desired import DesiredState, compile_desired_state
from reconciler.compile.slurm_keys import (
    KEY_CHANGES,
    changed_settings,
    exclusive_topo,
    written_pairs,
)
from reconciler.compile.topology_places import TopologyInputs
from reconciler.slurm_release import SlurmRelease
from tests.unit.conftest import config_from

S24, S25, S26 = SlurmRelease(24, 11, 5), SlurmRelease(25, 11, 7), SlurmRelease(26, 5, 3)
VALUES = """
slurmConfig:
  extraConfig: |
    JobContainerType=job_container/tmpfs
    AccountingStorageUser=slurm   # a comment
    SchedulerParameters=bf_continue,enable_job_state_cache
    PartitionName=extra Nodes=ALL ExclusiveUser=YES
compute:
  partitions: |
    PartitionName=all Nodes=ALL Default=YES OverSubscribe=EXCLUSIVE
  nodes:
    cpu: {definitions: [cpu-epyc], replicas: 2}
"""


def _state(live: SlurmRelease, values: str = VALUES) -> DesiredState:
    return compile_desired_state(config_from(values), live_release=live)


def _key_warnings(state: DesiredState) -> list[str]:
    return [str(w) for w in state.warnings if "which Slurm" in w.message]


def test_every_entry_names_a_release_and_a_replacement_or_says_remove() -> None:
    for change in KEY_CHANGES:
        assert change.since >= (25, 5)
        assert change.message(S26, "x").endswith(("instead", "remove it"))


def test_no_warning_on_the_release_before_the_change() -> None:
    assert _key_warnings(_state(S24)) == []


def test_25_11_warns_of_the_renamed_and_removed_keys_in_extra_config() -> None:
    assert _key_warnings(_state(S25)) == [
        "slurmConfig.extraConfig: warning: slurmConfig.extraConfig writes JobContainerType, "
        "which Slurm 25.11 renamed (this render targets Slurm 25.11.7): write NamespaceType "
        "instead",
        "slurmConfig.extraConfig: warning: slurmConfig.extraConfig writes "
        "AccountingStorageUser, which Slurm 25.11 removed (this render targets Slurm 25.11.7): "
        "remove it",
    ]


def test_26_05_also_warns_of_partition_options_and_option_words() -> None:
    warnings = _key_warnings(_state(S26))
    assert len(warnings) == 5
    assert any("writes SchedulerParameters=enable_job_state_cache, which Slurm 26.05 removed"
               in w for w in warnings)  # fmt: skip
    assert any("writes ExclusiveUser, which Slurm 26.05 deprecated (this render targets "
               "Slurm 26.05.3): write Exclusive=USER instead" in w for w in warnings)  # fmt: skip
    partitions = [w for w in warnings if "compute.partitions writes" in w]
    assert partitions == [
        "values.yaml:9 (compute.partitions): warning: compute.partitions writes "
        "OverSubscribe=EXCLUSIVE, which Slurm 26.05 deprecated (this render targets Slurm "
        "26.05.3): write Exclusive=NODE instead"
    ]


def test_written_pairs_reads_settings_and_partition_options_apart() -> None:
    settings, options = written_pairs(
        "# FrontendName=x\nFrontendName=fe1 FrontendAddr=a\nKillWait=30\n"
        "PartitionName=p Nodes=ALL ExclusiveTopo=YES\nnot a setting"
    )
    assert settings == [("FrontendName", "fe1"), ("KillWait", "30")]
    assert options == [("Nodes", "ALL"), ("ExclusiveTopo", "YES")]
    assert [c.key for c in changed_settings(settings, S25, "slurm.conf")] == ["FrontendName"]
    # A value word matches whole, in any case; another word of the same key does not.
    found = changed_settings([("schedulerparameters", "ENABLE_JOB_STATE_CACHE")], S26, "slurm.conf")
    assert [c.value for c in found] == ["enable_job_state_cache"]
    assert changed_settings([("SchedulerParameters", "enable_job_state")], S26, "slurm.conf") == []


def test_exclusive_partitions_render_the_option_of_the_release() -> None:
    assert exclusive_topo(S25) == ("ExclusiveTopo", "YES")
    assert exclusive_topo(S26) == ("Exclusive", "TOPO")
    values = """
compute:
  partitions: PartitionName=all Nodes=ALL Default=YES State=UP
  topology: {plugin: block, blockLabel: example.com/rack, exclusivePartitions: [all]}
  nodes:
    cpu: {definitions: [cpu-epyc], replicas: 2}
"""
    inputs = TopologyInputs({}, {})
    for live, option in ((S24, "ExclusiveTopo=YES"), (S25, "ExclusiveTopo=YES"),
                         (S26, "Exclusive=TOPO")):  # fmt: skip
        state = compile_desired_state(config_from(values), topology=inputs, live_release=live)
        line = next(x for x in state.slurm_conf.splitlines() if x.startswith("PartitionName="))
        assert line == f"PartitionName=all Nodes=ALL Default=YES State=UP {option}"
        assert not _key_warnings(state)  # what we render ourselves is never warned about
