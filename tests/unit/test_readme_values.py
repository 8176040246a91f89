"""The values tables cover the directoryService.* rows of the values table of SUNK's "Slurm
Workload Manager" page (in docs/directory.md) and its compute.pyxis.* keys (in docs/values.md),
every directory key we read, and every topology key (docs/topology.md). The README links to
them; it lists no keys itself (the README is for users; the tables are reference)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.config.directory import DIRECTORY_ENTRY, DIRECTORY_VALUES
from reconciler.config.pods import POD_VALUES
from reconciler.config.topology import ENTRY_VALUES, TOPOLOGY_VALUES

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"
DIRECTORY_DOC = (ROOT / "docs" / "directory.md").read_text()
TOPOLOGY_DOC = (ROOT / "docs" / "topology.md").read_text()
VALUES_DOC = (ROOT / "docs" / "values.md").read_text()


def _seed_rows(prefix: str) -> list[str]:
    seed = next(iter(sorted(SEEDS.glob("001_*.txt"))), None)
    if seed is None:
        pytest.skip(f"the text of SUNK's 'Slurm Workload Manager' page is not in {SEEDS}")
    return re.findall(rf"^\|\s*({re.escape(prefix)}[^\s|]*)\s*\|", seed.read_text(), re.M)


def test_every_seed_directory_service_row_is_in_the_directory_doc() -> None:
    rows = _seed_rows("directoryService.")
    assert len(rows) == 16
    assert [r for r in rows if f"`{r}`" not in DIRECTORY_DOC] == []


def test_every_seed_pyxis_key_is_in_the_values_doc() -> None:
    # SUNK's "Slurm Workload Manager" page names compute.pyxis.enabled and .mountHome in its text,
    # not its table.
    keys = ["compute.pyxis.enabled", "compute.pyxis.mountHome", *_seed_rows("compute.pyxis.")]
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
