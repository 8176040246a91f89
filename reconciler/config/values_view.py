"""The settings of a loaded config the shell acts on, read from the merged values once per
config (`Config.view`) and passed down: the values without their origin tags, whether nodes
power down (slurmConfig.slurmd), and whether our Pod scheduler runs (scheduler.enabled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.config.keys import default_of
from reconciler.config.layering import plain
from reconciler.config.power_saving import PowerSaving, power_saving


@dataclass(frozen=True)
class ValuesView:
    values: dict[str, Any]  # plain: what compile, policy params and topology read
    power: PowerSaving | None  # None: nodes never power down
    scheduler_enabled: bool

    @classmethod
    def of(cls, merged: dict[str, Any]) -> ValuesView:
        values = plain(merged)
        return cls(
            values=values,
            power=power_saving(values),
            scheduler_enabled=bool(
                (values.get("scheduler") or {}).get("enabled", default_of("scheduler.enabled"))
            ),
        )
