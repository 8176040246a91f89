"""A synthetic slurmrestd v0.0.42 answer of N nodes and M jobs, built from the node and job
slurmrestd 24.11.5 answered on the local stack (tests/unit/slurm_bodies/v0.0.42.json), so
every object carries every field a real one does (a job is 5.5 KB of JSON), and served over a
real HTTP socket on 127.0.0.1: the read goes through the same client, transport and codec as
the daemon's.

The mix is a busy GPU cluster's: nodes mostly allocated, some drained with reasons of four
prefixes and some down; two thirds of the jobs pending for a handful of reasons, in 8
partitions.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from bench.harness.serve import serving as harness_serving

CAPTURED = Path(__file__).resolve().parents[2] / "tests/unit/slurm_bodies/v0.0.42.json"
PARTITIONS = tuple(f"p{n}" for n in range(8))
# (base state and flags, reason), by share of the nodes in 100ths.
NODE_MIX = (
    (60, ["ALLOCATED"], ""), (18, ["MIXED"], ""), (10, ["IDLE"], ""),
    (3, ["IDLE", "DRAIN"], "k8s: node {n} cordoned"),
    (2, ["MIXED", "DRAIN"], "health: xid 79 on gpu 3"),
    (2, ["IDLE", "DRAIN"], "reconciler: shrink of gpu"), (2, ["IDLE", "DRAIN"], "reboot pending"),
    (3, ["DOWN", "NOT_RESPONDING"], "Not responding"),
)  # fmt: skip
# (state, reason), by share of the jobs in 100ths.
JOB_MIX = (
    (28, "RUNNING", "None"), (30, "PENDING", "Priority"), (15, "PENDING", "Resources"),
    (10, "PENDING", "Dependency"), (5, "PENDING", "JobHeldUser"),
    (4, "PENDING", "QOSMaxGRESPerUser"), (2, "PENDING", "ReqNodeNotAvail"),
    (3, "COMPLETED", "None"), (2, "COMPLETING", "None"), (1, "CANCELLED", "None"),
)  # fmt: skip


def _mixed(mix: tuple[tuple[Any, ...], ...], index: int) -> tuple[Any, ...]:
    """The mix's row for object INDEX: spread over every 100 objects by share."""
    slot, total = index % 100, 0
    for row in mix:
        total += row[0]
        if slot < total:
            return row
    return mix[-1]


def nodes_body(count: int) -> bytes:
    template = json.loads(CAPTURED.read_text())["node_draining"]
    nodes = []
    for n in range(count):
        _, state, reason = _mixed(NODE_MIX, n)
        used = 8 if "ALLOCATED" in state else (n % 8 if "MIXED" in state else 0)
        nodes.append({
            **template, "name": f"gpu-{n:05d}", "hostname": f"gpu-{n:05d}",
            "state": state, "reason": reason.format(n=n),
            "gres": "gpu:h100:8(S:0-1)", "gres_used": f"gpu:h100:{used}(IDX:0-{used})",
            "partitions": ["all", PARTITIONS[n % len(PARTITIONS)]],
        })  # fmt: skip
    return json.dumps({"nodes": nodes, "last_update": {"set": True, "number": 1}}).encode()


def jobs_body(count: int) -> bytes:
    template = json.loads(CAPTURED.read_text())["job_running"]
    jobs = []
    for n in range(count):
        _, state, reason = _mixed(JOB_MIX, n)
        jobs.append({
            **template, "job_id": 1000 + n, "name": f"train-{n}", "job_state": [state],
            "state_reason": reason, "partition": PARTITIONS[n % len(PARTITIONS)],
            "nodes": f"gpu-{n % 10000:05d}" if state == "RUNNING" else "",
        })  # fmt: skip
    return json.dumps({"jobs": jobs, "last_update": {"set": True, "number": 1}}).encode()


def diag_body() -> bytes:
    return json.dumps(json.loads(CAPTURED.read_text())["diag"]).encode()


PING = json.dumps({"pings": [{"hostname": "c", "pinged": "UP", "responding": True}]}).encode()


def serving(bodies: dict[str, bytes]) -> AbstractContextManager[str]:
    """A server on 127.0.0.1 answering GET PATH (query ignored) with BODIES[PATH]; its URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as slurmrestd
        disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall between header and body

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            body = bodies.get(path, b"{}")
            self.send_response(200 if path in bodies else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return harness_serving(Handler, "bench-slurmrestd")
