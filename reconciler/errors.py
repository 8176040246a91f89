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


class LineInjectionError(CompileError):
    """A value would add a line (or hide one) in a line-oriented file we render: the writer's
    last guard (compile/lines.py), for what no config check stopped. Names the file and the
    key or line, never the value (it may be a password)."""


class SlurmUpgradeRefusedError(ReconcilerError):
    """A change of the Slurm release that Slurm cannot make: a downgrade, a jump past the
    upgrade window, or daemons mixed in an order Slurm refuses (plan/upgrade.py). The message is
    one line naming the rule and the document it comes from."""


class LocalStackError(ReconcilerError):
    """A daemon of the local stack (etcd, kube-apiserver, munged, slurmctld, ...) failed."""


class SourceError(ReconcilerError):
    """The config repo could not be fetched: a git remote, a watched directory, an artifact.
    `revision` is set when one was fetched but refused (an unsigned commit, a bad digest)."""

    def __init__(self, message: str, *, revision: str = "", hint: str | None = None):
        super().__init__(message, hint=hint)
        self.revision = revision


# --- I/O adapters (reconciler/adapters/). No message here ever carries a token or key. ---


class SlurmApiError(ReconcilerError):
    """slurmrestd refused a request: a non-2xx answer, or an `errors` array inside a 200.

    `error_number`/`error_text` are Slurm's own (e.g. 2017 "Invalid job id specified") for the
    first error that has a number; `endpoint` is "METHOD /path".
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str = "",
        status: int | None = None,
        error_number: int | None = None,
        error_text: str = "",
        hint: str | None = None,
    ):
        super().__init__(f"{endpoint}: {message}" if endpoint else message, hint=hint)
        self.endpoint = endpoint
        self.status = status
        self.error_number = error_number
        self.error_text = error_text


class SlurmAuthError(SlurmApiError):
    """No usable JWT: missing, unreadable, expired, or refused by slurmrestd."""


class SlurmUnavailableError(SlurmApiError):
    """slurmrestd could not be reached, or answered with something that is not its JSON."""


class SlurmAnswerLimitError(SlurmUnavailableError):
    """slurmrestd's answer went past its size or time limit (transport.py): cut off, and the
    call that asked fails as if slurmrestd had not answered."""


class SlurmKeyMissingError(SlurmAuthError, SlurmUnavailableError):
    """The JWT key file does not exist (yet): a cluster whose key Secret is still to be made,
    or still to be mounted, cannot be asked anything, as if slurmrestd did not answer."""


class SlurmUnsupportedError(SlurmApiError):
    """The slurmrestd we talk to does not offer what was asked (an endpoint of a newer API), or
    offers no OpenAPI version this reconciler speaks."""


class SlurmctldMetricsError(ReconcilerError):
    """slurmctld's OpenMetrics endpoint did not answer, or answered with something else than
    its exposition (no MetricsType=metrics/openmetrics, a Slurm before 25.11, PrivateData)."""


class SlurmctldMetricsLimitError(SlurmctldMetricsError):
    """slurmctld's OpenMetrics answer went past its size, line or time limit: cut off, and the
    read counts as failed."""


class SlurmArgumentError(ReconcilerError):
    """A value the adapters refuse to send to Slurm: malformed, or able to inject options."""

    def __init__(self, argument: str, value: object, reason: str):
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"invalid {argument} {shown}: {reason}")
        self.argument = argument
        self.value = value
        self.reason = reason


class ScontrolError(ReconcilerError):
    """`scontrol` failed; `output` holds what it said (stderr first), `exit_code` its status."""

    def __init__(
        self,
        command: list[str] | tuple[str, ...],
        *,
        exit_code: int | None,
        message: str,
        hint: str | None = None,
    ):
        shown = " ".join(["scontrol", *command])
        status = f" (exit {exit_code})" if exit_code is not None else ""
        super().__init__(f"{shown}: {message}{status}", hint=hint)
        self.command = tuple(command)
        self.exit_code = exit_code
        self.output = message


class ScontrolTimeoutError(ScontrolError):
    """`scontrol` did not finish in time and was killed."""


class KubeApiError(ReconcilerError):
    """The Kubernetes API server refused a request (`status` is the HTTP code, `reason` the
    Status reason such as NotFound, Conflict, Invalid, Expired)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        target: str = "",
        hint: str | None = None,
    ):
        super().__init__(f"{target}: {message}" if target else message, hint=hint)
        self.status = status
        self.reason = reason
        self.target = target


class KubeConflictError(KubeApiError):
    """Server-side apply hit fields owned by other field managers (HTTP 409)."""

    def __init__(self, message: str, *, target: str, conflicts: list[tuple[str, str]]):
        managers = sorted({manager for manager, _ in conflicts})
        super().__init__(
            message,
            status=409,
            reason="Conflict",
            target=target,
            hint=f"fields owned by {', '.join(managers) or 'another manager'}: "
            "apply with force to take them over, or stop setting them",
        )
        self.conflicts = tuple(conflicts)
        self.managers = tuple(managers)


class PolicyLimitError(ReconcilerError):
    """A CEL expression over one of the limits Kubernetes sets on them (docs/security.md,
    "CEL policies"): refused when the policies are compiled, before it can run."""


class PolicyNestingError(PolicyLimitError):
    """An expression too long or nested too deep, refused before it is parsed or compiled."""


class PolicyCostError(PolicyLimitError):
    """An expression whose estimated worst-case cost is over the per-expression limit."""


@dataclass(frozen=True)
class Warning_:
    """Something suspicious that does not stop the compile (printed on stderr)."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: warning: {self.message}"
