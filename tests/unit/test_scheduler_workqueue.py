"""The work queue: each Pod handled once per burst of events, never by two workers at a time."""

from __future__ import annotations

import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from reconciler.scheduler.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def get_soon(queue: WorkQueue, timeout: float = 2.0) -> str | None:
    """get() on a thread, so a test fails instead of hanging when nothing comes."""
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.append(queue.get()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert result, "get() did not return"
    return result[0]


def drain(queue: WorkQueue) -> list[str]:
    """Every key in the queue, each marked done (delayed keys must be due already)."""
    keys = []
    while len(queue):
        key = queue.get()
        assert key is not None
        keys.append(key)
        queue.done(key)
    return keys


def test_keys_come_out_in_order() -> None:
    queue = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    assert [queue.get(), queue.get(), queue.get()] == ["a", "b", "c"]


def test_key_added_many_times_while_waiting_is_handled_once() -> None:
    queue = WorkQueue()
    for _ in range(5):
        queue.add("pod-1")
    queue.add("pod-2")
    assert len(queue) == 2
    assert drain(queue) == ["pod-1", "pod-2"]


def test_key_readded_while_processing_comes_back_after_done() -> None:
    queue = WorkQueue()
    queue.add("pod-1")
    assert queue.get() == "pod-1"
    queue.add("pod-1")
    queue.add("pod-1")
    assert len(queue) == 0  # not handed to a second worker while the first has it
    queue.done("pod-1")
    assert len(queue) == 1
    assert queue.get() == "pod-1"
    queue.done("pod-1")
    assert len(queue) == 0


def test_key_processed_without_readd_does_not_come_back() -> None:
    queue = WorkQueue()
    queue.add("pod-1")
    key = queue.get()
    assert key is not None
    queue.done(key)
    assert len(queue) == 0


def test_other_keys_are_served_while_one_is_processing() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")
    queue.add("b")
    assert queue.get() == "b"


def test_add_after_waits_for_its_time() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("later", 10)
    queue.add("now")
    assert queue.get() == "now"
    queue.done("now")
    clock.now += 9.9
    queue.add("again")
    assert queue.get() == "again"  # "later" is not due yet
    clock.now += 0.1
    assert queue.get() == "later"


def test_delayed_keys_come_out_in_due_order() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("c", 30)
    queue.add_after("a", 10)
    queue.add_after("b", 20)
    clock.now += 60
    assert [queue.get(), queue.get(), queue.get()] == ["a", "b", "c"]


def test_add_after_of_a_waiting_key_does_not_duplicate_it() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add("pod-1")
    queue.add_after("pod-1", 5)
    clock.now += 5
    assert drain(queue) == ["pod-1"]


def test_add_after_without_delay_is_an_add() -> None:
    queue = WorkQueue(clock=FakeClock())  # the clock never moves: only an add comes out
    queue.add_after("a", 0)
    queue.add_after("b", -3)
    assert [queue.get(), queue.get()] == ["a", "b"]


def test_delayed_key_due_while_processing_comes_back_after_done() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add("pod-1")
    assert queue.get() == "pod-1"
    queue.add_after("pod-1", 1)
    queue.add("other")
    clock.now += 1
    assert queue.get() == "other"  # pod-1 is due, but still being processed
    queue.done("pod-1")
    assert queue.get() == "pod-1"


def test_blocked_get_wakes_when_a_delayed_key_is_due() -> None:
    queue = WorkQueue()
    queue.add_after("soon", 0.05)
    started = time.monotonic()
    assert get_soon(queue) == "soon"
    assert time.monotonic() - started >= 0.04


def test_blocked_get_wakes_for_an_earlier_delayed_key() -> None:
    queue = WorkQueue()
    queue.add_after("late", 60)
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.append(queue.get()), daemon=True)
    thread.start()
    time.sleep(0.02)
    queue.add_after("soon", 0.02)
    thread.join(2)
    assert result == ["soon"]


def test_blocked_get_wakes_on_add() -> None:
    queue = WorkQueue()
    threading.Timer(0.02, queue.add, args=("pod-1",)).start()
    assert get_soon(queue) == "pod-1"


def test_close_makes_get_return_none() -> None:
    queue = WorkQueue()
    queue.add("pod-1")
    queue.close()
    assert queue.get() is None


def test_close_wakes_a_waiting_worker() -> None:
    queue = WorkQueue()
    queue.add_after("far", 3600)
    threading.Timer(0.02, queue.close).start()
    assert get_soon(queue) is None


def test_one_key_is_never_handled_by_two_workers_at_once() -> None:
    queue = WorkQueue()
    busy: set[str] = set()
    overlaps: list[str] = []
    handled: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        while (key := queue.get()) is not None:
            with lock:
                if key in busy:
                    overlaps.append(key)
                busy.add(key)
            time.sleep(0.001)
            with lock:
                busy.discard(key)
                handled.append(key)
            queue.done(key)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for thread in workers:
        thread.start()
    for i in range(200):
        queue.add(f"pod-{i % 5}")
    deadline = time.monotonic() + 5
    while (len(queue) or busy) and time.monotonic() < deadline:
        time.sleep(0.01)
    queue.close()
    for thread in workers:
        thread.join(2)
    assert overlaps == []
    assert set(handled) == {f"pod-{i}" for i in range(5)}


@given(st.lists(st.sampled_from(["add a", "add b", "get", "done"]), max_size=40))
def test_model_every_add_is_handled_once_after_it(ops: list[str]) -> None:
    queue = WorkQueue(clock=FakeClock())
    in_hand: list[str] = []
    unhandled: set[str] = set()  # added since the last time a worker got it
    for op in ops:
        if op.startswith("add"):
            queue.add(op[-1])
            unhandled.add(op[-1])
        elif op == "get" and len(queue):
            key = queue.get()
            assert key is not None
            assert key not in in_hand
            in_hand.append(key)
            unhandled.discard(key)
        elif op == "done" and in_hand:
            queue.done(in_hand.pop(0))
        assert len(queue) <= 2
    for key in in_hand:
        queue.done(key)
    rest = drain(queue)
    assert sorted(rest) == sorted(unhandled)


def test_an_urgent_key_goes_ahead_of_the_backlog() -> None:
    queue = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key)
    queue.add("c", urgent=True)
    queue.add("d", urgent=True)
    assert [queue.get() for _ in range(4)] == ["c", "d", "a", "b"]


def test_a_key_made_urgent_while_handled_comes_back_urgent() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert queue.get() == "a"
    queue.add("b")
    queue.add("a", urgent=True)
    queue.done("a")
    assert queue.get() == "a"
