"""Stage timing: wall and process CPU per stage, and runs interleaved round-robin.

The machine is shared and noisy, so every benchmark times all its sizes and scenarios in the
same run, interleaved, with the start rotating from round to round, `gc.collect()` between runs
(garbage of one run is not charged to the next; the collector stays on during the run), and
reports the best and the median of the runs.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

Stamp = tuple[float, float]  # (perf_counter, process_time)
# key -> stage -> seconds, one entry per run
Times = dict[Any, dict[str, list[float]]]


def stamp() -> Stamp:
    return time.perf_counter(), time.process_time()


def stage_times(stages: Sequence[str], stamps: Sequence[Stamp]) -> tuple[dict[str, float], ...]:
    """(wall, cpu) per stage from the stamps taken between them: STAGES[i] runs from stamps[i]
    to stamps[i + 1]; the last stage, "total", from the first stamp to the last."""
    *steps, total = stages
    assert len(stamps) == len(steps) + 1, (stages, len(stamps))
    return tuple(
        {
            **{s: stamps[n + 1][i] - stamps[n][i] for n, s in enumerate(steps)},
            total: stamps[-1][i] - stamps[0][i],
        }
        for i in (0, 1)
    )


def round_robin(
    jobs: Sequence[tuple[Hashable, Any]],
    repeat: int,
    stages: Sequence[str],
    run: Callable[[Any], tuple[dict[str, float], dict[str, float], Any]],
    check: Callable[[Any, Any], Any],
    *,
    shift_step: int = 1,
) -> tuple[Times, Times, dict[Any, Any]]:
    """Run every (key, job) REPEAT times, round-robin; round N starts at job N x SHIFT_STEP (so
    no job always runs right after the largest). RUN(job) -> (wall, cpu, result); CHECK(job,
    result) is called on each job's first result (it raises to stop the benchmark) and its
    answer kept per key. The caller warms up first."""
    wall: Times = {key: {s: [] for s in stages} for key, _ in jobs}
    cpu: Times = {key: {s: [] for s in stages} for key, _ in jobs}
    counts: dict[Any, Any] = {}
    order = list(jobs)
    for round_ in range(repeat):
        shift = round_ * shift_step % len(order)
        for key, job in order[shift:] + order[:shift]:
            gc.collect()  # garbage of the previous run is not charged to this one
            wall_times, cpu_times, result = run(job)
            if key not in counts:
                counts[key] = check(job, result)
            del result
            for stage in stages:
                wall[key][stage].append(wall_times[stage])
                cpu[key][stage].append(cpu_times[stage])
    return wall, cpu, counts


def wait_until(probe: Callable[[], bool], timeout: float, poll: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True
