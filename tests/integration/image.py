"""The project's images for the tests: the builder is reconciler/local/kubelets/image_build.py
(which `reconciler local up --kubelet` uses too); this module is CI's early build of all
three, `python -m tests.integration.image build`, and the tests' names for the builder's parts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

from reconciler.local.kubelets.image_build import (  # noqa: F401 (the tests' names for them)
    BASE_TAG,
    BUILD_TIMEOUT,
    CACHE,
    HOST_CA_BUNDLE,
    MARIADB_CONTEXT,
    MARIADB_TAG,
    MIRROR,
    REPOSITORY,
    ROOT,
    SLURM_CONTEXT,
    SLURM_REPOSITORY,
    Built,
    ImageError,
    Podman,
    Recipe,
    build,
    build_all,
    build_lock,
    build_mariadb,
    build_slurm,
    cluster_oci_archives,
    ensure_base,
    image_tag,
    save_oci_archive,
    slim,
    slurm_tag,
    storage_driver,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.integration.image",
        description="Build the project's images as the image tests do (CI starts it early): "
        "the reconciler's, then the cluster's slurm and mariadb.",
    )
    parser.add_argument("command", choices=["build"])
    parser.parse_args(argv)
    failed = 0
    for make in (build, build_slurm, build_mariadb):
        try:
            built = make()
        except (ImageError, OSError, subprocess.SubprocessError) as err:
            print(f"image build failed ({make.__name__}): {err}", file=sys.stderr)
            failed += 1
            continue
        print(
            f"{built.tag}: {built.size_bytes / 1e6:.0f} MB, built in {built.seconds:.0f} s"
            f" (podman, {built.podman.driver} storage)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
