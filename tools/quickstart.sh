#!/usr/bin/env bash
# The main job on a fresh machine (Debian 12, as root), in one command: what the embedded local
# stack needs (Debian packages, the Kubernetes and Slurm builds, cached after the first run;
# then the venv), then `reconciler local up` of fixtures/config-repo in the foreground (Ctrl-C,
# or `.venv/bin/reconciler local down` from another shell, stops it). Arguments go to
# `local up` (a repo, --kubelet, --slurm 22.05, ...). The test suite is `bash .ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { printf '\n== %s (%ss)\n' "$1" "$(( $(date +%s) - started ))"; }

step "machine set-up: Debian packages, Kubernetes and Slurm builds (cached)"
bash tools/setup.sh

step "python venv"
# A venv made before python3-venv was installed has bin/python but no pip: make it again.
.venv/bin/python -m pip --version >/dev/null 2>&1 || python3 -m venv --clear .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .

step "reconciler local up"
exec .venv/bin/reconciler local up "$@"
