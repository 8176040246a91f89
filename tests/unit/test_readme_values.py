"""The values tables cover the directoryService.* rows of the values table of SUNK's "Slurm
Workload Manager" page (in docs/directory.md) and its compute.pyxis.* keys (in docs/values.md),
every directory key we read, and every topology key (docs/topology.md). The README links to
them; it lists no keys itself (the README is for users; the tables are reference)."""

from __future__ import annotations

from pathlib import Path

from reconciler.config.directory import DIRECTORY_ENTRY, DIRECTORY_VALUES
from reconciler.config.pods import POD_VALUES
from reconciler.config.topology import ENTRY_VALUES, TOPOLOGY_VALUES

ROOT = Path(__file__).resolve().parents[2]
DIRECTORY_DOC = (ROOT / "docs" / "directory.md").read_text()
TOPOLOGY_DOC = (ROOT / "docs" / "topology.md").read_text()
VALUES_DOC = (ROOT / "docs" / "values.md").read_text()


# The directoryService.* rows of the values table of SUNK's "Slurm Workload Manager" page, as
# the page writes them.
PAGE_DIRECTORY_ROWS = (
    "directoryService.sudoGroups",
    *(f"directoryService.directories[].{key}" for key in (
        "name", "enabled", "debugLevel", "ldapUri", "user.bindDn", "user.searchBase",
        "user.password", "user.canary", "defaultShell", "fallbackHomeDir", "overrideHomeDir",
        "ldapsCert", "sudoGroups", "schema", "user.existingSecret")),
)  # fmt: skip


def test_every_directory_service_row_of_the_page_is_in_the_directory_doc() -> None:
    assert len(PAGE_DIRECTORY_ROWS) == 16
    assert [r for r in PAGE_DIRECTORY_ROWS if f"`{r}`" not in DIRECTORY_DOC] == []


def test_every_pyxis_key_of_the_page_is_in_the_values_doc() -> None:
    # SUNK's "Slurm Workload Manager" page names compute.pyxis.enabled and .mountHome in its text,
    # not its table.
    keys = ["compute.pyxis.enabled", "compute.pyxis.mountHome"]
    assert [k for k in keys if f"| `{k}`" not in VALUES_DOC] == []


def test_every_topology_key_we_read_is_in_the_topology_doc() -> None:
    keys = [k for k in TOPOLOGY_VALUES if k != "compute.topology"]
    assert len(keys) == 6
    assert [k for k in keys if f"| `{k}` |" not in TOPOLOGY_DOC] == []
    several = TOPOLOGY_DOC.split("## Several topologies")[1].split("\n## ")[0]
    assert [k for k in ENTRY_VALUES if f"`{k}`" not in several] == []


def test_every_directory_key_we_read_is_in_the_directory_doc() -> None:
    keys = [*DIRECTORY_VALUES, *(f"directoryService.directories[].{k}" for k in DIRECTORY_ENTRY
                                 if k != "user")]  # fmt: skip
    assert [k for k in keys if k != "directoryService" and k != "directoryService.directories"
            and f"`{k}`" not in DIRECTORY_DOC] == []  # fmt: skip


def test_every_pod_key_of_ours_is_in_the_values_doc() -> None:
    """image.*, sidecars.*.resources, clusterDomain: the keys of the Pods we render."""
    keys = [k for k in POD_VALUES if k.count(".") != 1 or k.startswith("image.")]
    keys = [k for k in keys if k not in ("image", "sidecars")]
    assert len(keys) == 6
    assert [k for k in keys if f"`{k}`" not in VALUES_DOC] == []
