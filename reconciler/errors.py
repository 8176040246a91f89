"""Typed, user-facing errors: what went wrong, where (file, line, key path or object), how to fix.

The CLI prints `str(error)` and exits 1; no traceback reaches the user for these.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where a value came from: a file, optionally a 1-based line, and a dotted key path."""

    file: str
    line: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        text = self.file
        if self.line is not None:
            text += f":{self.line}"
        if self.path:
            text += f" ({self.path})"
        return text


class ReconcilerError(Exception):
    """Base of every error the user is meant to read."""

    def __init__(self, message: str, *, where: Location | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConfigSyntaxError(ReconcilerError):
    """A file of the config repo is not valid YAML."""


class ConfigTypeError(ReconcilerError):
    """A value has the wrong type for its key."""


class UnknownLayerError(ReconcilerError):
    """A node definition names a layer that neither the library nor the repo defines."""


class LayerCycleError(ReconcilerError):
    """Layers reference each other in a cycle."""

    def __init__(self, cycle: list[str], *, where: Location | None = None):
        super().__init__(
            "layer cycle: " + " -> ".join(cycle),
            where=where,
            hint="remove one of these names from the other's `definitions` list",
        )
        self.cycle = cycle


class CompileError(ReconcilerError):
    """The composed configuration cannot become a valid Slurm or Kubernetes object."""
