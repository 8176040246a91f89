"""Which slurmrestd OpenAPI versions this reconciler speaks (a codec each), and which of them a
server serves: `connect()` asks `GET /openapi/v3` and speaks the newest both sides know."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.adapters.slurm import v0038, v0040, v0043, v0045
from reconciler.adapters.slurm.codec import Codec
from reconciler.errors import SlurmArgumentError, SlurmUnsupportedError

# Newest first: discovery takes the first the server serves.
CODECS: tuple[Codec, ...] = (v0045.CODEC, *v0043.CODECS, *v0040.CODECS, v0038.CODEC)
SUPPORTED_VERSIONS = tuple(codec.version for codec in CODECS)
_VERSION_PATH = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/")


def codec_for(version: str) -> Codec:
    for codec in CODECS:
        if codec.version == version:
            return codec
    raise SlurmArgumentError(
        "api_version", version, f"expected one of {', '.join(SUPPORTED_VERSIONS)}"
    )


def served_versions(spec: Mapping[str, Any]) -> list[str]:
    """The `/slurm/vX.Y.Z/` versions an OpenAPI document has paths for, newest first."""
    paths = spec.get("paths")
    found = {m.group(1) for p in paths if (m := _VERSION_PATH.match(p))} if paths else set()
    return sorted(found, key=lambda v: tuple(int(x) for x in v[1:].split(".")), reverse=True)


def choose_codec(served: Sequence[str]) -> Codec:
    for codec in CODECS:
        if codec.version in served:
            return codec
    raise SlurmUnsupportedError(
        f"slurmrestd serves {', '.join(served) or 'no slurm/ API'}; this reconciler speaks "
        f"{', '.join(SUPPORTED_VERSIONS)}",
        endpoint="GET /openapi/v3",
        hint="load a supported data parser (slurmrestd -s openapi/slurmctld on Slurm 23.11+, "
        "-s openapi/v0.0.38 on 22.05)",
    )
