"""What the scheduler's safety-net poll costs on slurmrestd v0.0.40+: `GET /jobs/` (every job),
`GET /jobs/?update_time` when nothing changed, and `GET /jobs/state/` (ids and states only).

    .venv/bin/reconciler local up &               # a 24.11 stack (the default)
    .venv/bin/python -m bench.poll_cost --jobs 200

Submits `--jobs` held jobs (so nothing runs), times each request `--rounds` times side by side
after one warm-up round, prints medians and sizes, and cancels its jobs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from reconciler.adapters.slurm.client import connect
from reconciler.adapters.slurm.jwt import MintedTokens
from reconciler.adapters.slurm.model import JobSpec
from reconciler.adapters.slurm.transport import Transport
from reconciler.local.slurm.cluster import current_user
from reconciler.local.stack import LocalStack
from reconciler.local.stack_record import default_runtime_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime-dir", type=Path, default=default_runtime_dir("default"))
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    slurm = LocalStack.open(args.runtime_dir).slurm
    assert slurm is not None, "no Slurm in that stack"
    tokens = MintedTokens(slurm.paths.jwt_key, current_user())
    api = connect(slurm.rest_url(), tokens)
    base = f"/slurm/{api.api_version}"
    spec = JobSpec(script="#!/bin/sh\ntrue\n", environment={"PATH": "/bin"}, hold=True,
                   standard_output="/dev/null", current_working_directory="/tmp")  # fmt: skip
    ids = [api.submit(spec).job_id for _ in range(args.jobs)]
    http = Transport(slurm.rest_url(), tokens, timeout=30)
    future = f"uts{int(time.time()) + 3600}"
    cases = {
        "GET /jobs/ (every job)": ("/jobs/", None),
        "GET /jobs/?update_time= (unchanged)": ("/jobs/", {"update_time": future}),
        "GET /jobs/state/ (ids and states)": ("/jobs/state/", None),
    }
    print(f"Slurm {api.slurm_version}, slurmrestd {api.api_version}, {len(ids)} held jobs")
    try:
        medians: dict[str, float] = {}
        for _ in ("warm-up", "measured"):  # the second round's medians are kept
            for name, (path, params) in cases.items():
                seconds = []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    http.request("GET", base + path, params=params)
                    seconds.append(time.perf_counter() - started)
                medians[name] = statistics.median(seconds)
        unchanged = medians["GET /jobs/?update_time= (unchanged)"]
        for name, median in medians.items():
            print(f"  {name:38s} median {median * 1000:7.2f} ms  ({median / unchanged:5.1f}x)")
    finally:
        for job_id in ids:
            api.cancel(job_id)
        http.close()
        api.close()


if __name__ == "__main__":
    main()
