"""Memory as Slurm schedules it (compile/node_memory.py): the warnings, over SUNK's pages' text."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconciler.compile.desired import DesiredState
from reconciler.errors import CompileError

# The values table of SUNK's "Slurm Workload Manager" page: "slurmConfig.selectTypeParameters | |
# `CR_Core `" and "slurmConfig.defMemPerCPU | The default memory per CPU in megabytes. ... |
# `4096`".
SLURM_PAGE_SLURM_CONFIG = """\
slurmConfig:
  selectTypeParameters: CR_Core
  defMemPerCPU: 4096
"""
# The rtx4000 of SUNK's "Slurm Workload Manager" page ("Compute Node Definitions"): "requests: cpu:
# '8' memory: 16Gi".
RTX4000 = "compute:\n  nodes:\n    rtx4000-cu117: {definitions: [rtx4000, cu117, las1]}\n"


def _memory_warnings(state: DesiredState) -> list[str]:
    return [
        str(w) for w in state.warnings if "SelectTypeParameters" in str(w) or "DefMem" in str(w)
    ]


def test_the_pages_cr_core_is_warned_with_the_fix(
    compile_values: Callable[..., DesiredState],
) -> None:
    """SUNK's "Schedule Kubernetes Pods with Slurm": "Setting SelectTypeParameters to CR_CPU,
    CR_Core, or CR_Socket is discouraged because these values allow memory oversubscription." """
    state = compile_values(SLURM_PAGE_SLURM_CONFIG + "compute: {nodes: {}}\n")
    [warning] = _memory_warnings(state)
    assert warning.startswith("slurmConfig.selectTypeParameters: warning: ")
    assert "SelectTypeParameters=CR_Core does not make memory a consumable" in warning
    assert warning.endswith("set CR_Core_Memory")


@pytest.mark.parametrize(
    ("written", "fixed"),
    [("CR_CPU", "CR_CPU_Memory"), ("cr_socket", "CR_Socket_Memory"),
     ("CR_Core,CR_ONE_TASK_PER_CORE", "CR_Core_Memory,CR_ONE_TASK_PER_CORE")],
)  # fmt: skip
def test_every_discouraged_value_names_its_memory_twin(
    compile_values: Callable[..., DesiredState], written: str, fixed: str
) -> None:
    state = compile_values(f"slurmConfig:\n  selectTypeParameters: '{written}'\ncompute: {{}}\n")
    [warning] = _memory_warnings(state)
    assert warning.endswith(f"set {fixed}")


@pytest.mark.parametrize("written", ["CR_Core_Memory", "CR_Memory", "CR_Socket_Memory"])
def test_consumable_memory_is_not_warned(
    compile_values: Callable[..., DesiredState], written: str
) -> None:
    state = compile_values(f"slurmConfig:\n  selectTypeParameters: '{written}'\ncompute: {{}}\n")
    assert _memory_warnings(state) == []


def test_an_extra_config_line_is_what_is_judged(
    compile_values: Callable[..., DesiredState],
) -> None:
    values = (
        "slurmConfig:\n  selectTypeParameters: CR_Core_Memory\n"
        "  extraConfig: |\n    SelectTypeParameters=CR_Core\ncompute: {}\n"
    )
    [warning] = _memory_warnings(compile_values(values))
    assert warning.startswith("slurmConfig.extraConfig: warning: SelectTypeParameters=CR_Core ")


def test_the_pages_rtx4000_cannot_take_a_whole_node_job(
    compile_values: Callable[..., DesiredState],
) -> None:
    """8 CPUs x 4096 MiB = 32768 MiB asked of a node of 16Gi (16384 MiB)."""
    state = compile_values(SLURM_PAGE_SLURM_CONFIG.replace("CR_Core", "CR_Core_Memory") + RTX4000)
    [warning] = _memory_warnings(state)
    assert warning.startswith("slurmConfig.defMemPerCPU: warning: DefMemPerCPU=4096 MiB x 8 CPUs")
    assert "node definition 'rtx4000-cu117' is 32768 MiB, more than the 16384 MiB it has " in (
        warning
    )
    assert "set DefMemPerCPU to 2048 or less, or give 'rtx4000-cu117' 32Gi of memory" in warning


def test_our_default_def_mem_per_cpu_is_judged_too(
    compile_values: Callable[..., DesiredState],
) -> None:
    [warning] = _memory_warnings(compile_values(RTX4000))
    assert warning.startswith("slurmConfig.defMemPerCPU (default): warning: DefMemPerCPU=4096")


def test_a_def_mem_per_cpu_that_fits_is_not_warned(
    compile_values: Callable[..., DesiredState],
) -> None:
    values = "slurmConfig: {defMemPerCPU: 2048}\n" + RTX4000
    assert _memory_warnings(compile_values(values)) == []
    values = "slurmConfig: {defMemPerCPU: 0}\n" + RTX4000  # 0: no default
    assert _memory_warnings(compile_values(values)) == []


# SUNK's "Schedule Kubernetes Pods with Slurm", "Memory": "MemSpecLimit can be used in the slurm
# NodeSet configuration to reserve memory for slurmd and other system Pods (such as DaemonSets)."
def _with_spec_limit(limit: int, def_mem: int = 1024, select: str = "CR_Core_Memory") -> str:
    return (
        f"slurmConfig: {{defMemPerCPU: {def_mem}, selectTypeParameters: {select}}}\n"
        + RTX4000.replace("las1]}", f"las1], memSpecLimit: {limit}}}")
    )


def test_mem_spec_limit_is_on_the_definitions_node_line(
    compile_values: Callable[..., DesiredState],
) -> None:
    state = compile_values(_with_spec_limit(2048))
    [line] = [x for x in state.slurm_conf.splitlines() if x.startswith("NodeName=")]
    assert " CPUs=8 RealMemory=16384 MemSpecLimit=2048 " in line
    assert not [w for w in state.warnings if "memSpecLimit" in str(w)]  # no longer ignored


@pytest.mark.parametrize("limit", [0, 16384, 20000])
def test_mem_spec_limit_must_leave_jobs_some_memory(
    compile_values: Callable[..., DesiredState], limit: int
) -> None:
    with pytest.raises(CompileError) as error:
        compile_values(_with_spec_limit(limit))
    assert (
        f"node definition 'rtx4000-cu117': memSpecLimit {limit} MiB is not between 1 and its "
        "RealMemory (16384 MiB" in str(error.value)
    )
    assert "MiB (megabytes, as Slurm reads it): e.g. 1638" in (error.value.hint or "")


def test_def_mem_per_cpu_is_judged_against_what_mem_spec_limit_leaves(
    compile_values: Callable[..., DesiredState],
) -> None:
    """2048 x 8 CPUs = 16384 MiB fits RealMemory, not the 14336 MiB MemSpecLimit leaves."""
    [warning] = _memory_warnings(compile_values(_with_spec_limit(2048, def_mem=2048)))
    assert "more than the 14336 MiB it has for jobs (RealMemory=16384 less MemSpecLimit=2048)" in (
        warning
    )
    assert "set DefMemPerCPU to 1792 or less, or give 'rtx4000-cu117' 18Gi of memory" in warning


# slurm.conf(5), MemSpecLimit: "having the Memory set in SelectTypeParameters as any of the
# options that has it as a consumable resource is needed for this option to work".
def test_mem_spec_limit_under_our_default_cr_core_is_said_to_do_nothing(
    compile_values: Callable[..., DesiredState],
) -> None:
    values = _with_spec_limit(2048).replace(", selectTypeParameters: CR_Core_Memory", "")
    [warning] = [str(w) for w in compile_values(values).warnings if "memSpecLimit" in str(w)]
    assert warning == (
        "values.yaml:4: warning: node definition 'rtx4000-cu117' sets memSpecLimit: "
        "2048 (MiB), which has no effect: SelectTypeParameters=CR_Core "
        "(slurmConfig.selectTypeParameters, our default) does not make memory a consumable "
        "resource, and Slurm keeps MemSpecLimit from jobs only when it is; set "
        "slurmConfig.selectTypeParameters to CR_Core_Memory (CR_Core_Memory or CR_CPU_Memory)"
    )


def test_the_written_cr_core_warning_says_mem_spec_limit_does_nothing_and_names_the_key(
    compile_values: Callable[..., DesiredState],
) -> None:
    state = compile_values(_with_spec_limit(2048, select="CR_CPU"))
    warnings = _memory_warnings(state)
    assert "a node definition's memSpecLimit has no effect; set CR_CPU_Memory" in warnings[0]
    [limit] = [w for w in warnings if "sets memSpecLimit: 2048" in w]
    assert "SelectTypeParameters=CR_CPU (slurmConfig.selectTypeParameters) does not" in limit
    assert limit.endswith("set slurmConfig.selectTypeParameters to CR_CPU_Memory (CR_Core_Memory "
                          "or CR_CPU_Memory)")  # fmt: skip


def test_mem_spec_limit_with_memory_consumable_is_not_warned(
    compile_values: Callable[..., DesiredState],
) -> None:
    for select in ("CR_Core_Memory", "CR_CPU_Memory", "CR_Memory"):
        state = compile_values(_with_spec_limit(2048, select=select))
        assert not [w for w in state.warnings if "memSpecLimit" in str(w)], select
