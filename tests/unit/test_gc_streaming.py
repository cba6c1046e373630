"""The processes' garbage collection (services.common): full collections only when the process
makes them, between bursts of changes or once its new containers outgrow what it held; the
API server's (streaming) short young ones."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator

import pytest

from services import common


@contextlib.contextmanager
def _collections_started() -> Iterator[dict[int, int]]:
    """Generation → the collections of it started meanwhile, by any thread."""
    collections = {0: 0, 1: 0, 2: 0}

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections[info["generation"]] += 1

    gc.callbacks.append(count)
    try:
        yield collections
    finally:
        gc.callbacks.remove(count)


@contextlib.contextmanager
def _full_collections_of_the_thread() -> Iterator[list[float]]:
    """When each full collection ``collect_between_bursts``' thread made meanwhile started."""
    fulls: list[float] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2 and \
                threading.current_thread().name == "full-collections":
            fulls.append(time.monotonic())

    gc.callbacks.append(count)
    try:
        yield fulls
    finally:
        gc.callbacks.remove(count)


def _wait_for_one(fulls: list[float]) -> None:
    deadline = time.monotonic() + 10
    while not fulls and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_full_collection_waits_for_a_quiet_moment_but_not_forever() -> None:
    due = common.full_collection_due
    every, idle, most = (common.FULL_GC_SECONDS, common.FULL_GC_IDLE_SECONDS,
                         common.FULL_GC_MAX_SECONDS)
    assert not due(now=every - 1, last_full=0.0, last_change=0.0)  # too soon after the last
    assert due(now=every, last_full=0.0, last_change=every - idle)  # quiet for long enough
    assert not due(now=every, last_full=0.0, last_change=every - idle / 2)  # changes going on
    assert not due(now=most - 1, last_full=0.0, last_change=most - 1)
    assert due(now=most, last_full=0.0, last_change=most)  # busy all along: late, but made


def test_a_full_collection_comes_sooner_when_the_process_grew_by_what_it_held() -> None:
    due = common.full_collection_due
    idle, least = common.FULL_GC_IDLE_SECONDS, common.FULL_GC_MIN_OBJECTS
    held = 3 * least
    quiet, busy = dict(now=10.0, last_full=0.0, last_change=10.0 - idle), \
        dict(now=10.0, last_full=0.0, last_change=10.0)
    assert not due(**quiet, new=held - 1, held=held)
    assert due(**quiet, new=held, held=held)  # as many new containers as it held: when quiet
    assert not due(**busy, new=held, held=held)  # not in the middle of a burst
    assert not due(**busy, new=4 * held - 1, held=held)
    assert due(**busy, new=4 * held, held=held)  # four times as many: even in a burst
    # a small process: never before the least number of new containers
    assert not due(**quiet, new=least - 1, held=10)
    assert due(**quiet, new=least, held=10)
    assert due(**busy, new=4 * least, held=10)


def test_the_streaming_thresholds_keep_young_and_middle_collections_small_and_start_no_full_one(
        ) -> None:
    before = gc.get_threshold()
    try:
        common.tune_gc(streaming=True)
        young, middle, full = gc.get_threshold()
        assert young > 0 and middle < common.GC_THRESHOLDS[1]  # young ones, unlike the others
        # allocations before the collector would start a full one by itself
        assert young * (middle + 1) * full >= 10 ** 12
        gc.collect()  # the generations' counts start from nothing, whatever ran before
        with _collections_started() as collections:
            # long-lived, as a cache's: what takes ten young collections
            keep = [[i] for i in range(10 * young)]
        # every other collection is a middle one, so none walks more than two young
        # collections' survivors (a rollout's new objects stalled every watch for 20-35 ms
        # when one did every sixth)
        assert collections[0] >= 4 and collections[1] >= collections[0] - 1, collections
        assert collections[2] == 0, collections
        del keep
        common.tune_gc()
        assert gc.get_threshold() == common.GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)


def test_a_burst_of_long_lived_objects_makes_no_collection() -> None:
    """A cache's new objects are walked by no collection but the full ones the process
    makes itself, between bursts, and Python's count of them goes on growing."""
    before = gc.get_threshold()
    try:
        common.tune_gc()
        gc.collect()
        with _collections_started() as collections:
            keep = [[i] for i in range(1_000_000)]  # 1,428 young collections by default
            new = gc.get_count()[0]
        assert collections == {0: 0, 1: 0, 2: 0}, collections
        assert new >= len(keep)
        del keep
    finally:
        gc.set_threshold(*before)


def test_the_full_collections_wait_until_the_burst_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "FULL_GC_IDLE_SECONDS", 0.02)
    monkeypatch.setattr(common, "FULL_GC_SECONDS", 0.0)
    busy_until = time.monotonic() + 0.5  # log entries keep coming until then
    stop = threading.Event()
    with _full_collections_of_the_thread() as fulls:
        try:
            thread = common.collect_between_bursts(lambda: min(time.monotonic(), busy_until),
                                                   stop)
            _wait_for_one(fulls)
        finally:
            stop.set()
    thread.join(timeout=5)
    assert fulls and fulls[0] >= busy_until + common.FULL_GC_IDLE_SECONDS, fulls
    assert not thread.is_alive()


def test_a_burst_that_outgrows_four_times_what_the_process_held_is_collected_in_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "FULL_GC_IDLE_SECONDS", 0.01)  # how often the thread looks
    monkeypatch.setattr(common, "FULL_GC_MIN_OBJECTS", 1)
    before = gc.get_threshold()
    stop = threading.Event()
    common.tune_gc()
    gc.collect()
    keep: list[list[int]] = []
    with _full_collections_of_the_thread() as fulls:
        try:
            thread = common.collect_between_bursts(time.monotonic, stop)  # changes all along
            held = len(gc.get_objects())
            while len(keep) < 3 * held:  # not yet four times as many new containers: none due
                keep.append([len(keep)])
            assert not fulls
            while len(keep) < 5 * held:  # past four times as many (and the containers before)
                keep.append([len(keep)])
            _wait_for_one(fulls)
        finally:
            stop.set()
            gc.set_threshold(*before)
    thread.join(timeout=5)
    assert fulls
    assert not thread.is_alive()
