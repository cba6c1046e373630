"""Which container and which run ``kubectl logs`` reads (shared.api.podlog, upstream's rules and
texts), the query options, reading one run's file with tail, limit and follow, and the limit
of a stream (the Docker engine's log)."""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from services.node_agent import logshim
from services.node_agent.containerlogs import limited, stream
from shared.api.podlog import (
    SECOND,
    LogError,
    LogOptions,
    cri_line,
    options,
    parse_cri,
    parse_time,
    pick_container,
    pick_run,
    request_path,
    since,
    stamp,
    untimed,
)


def pod(*statuses: dict[str, Any], mains: tuple[str, ...] = ("app",),
        inits: tuple[str, ...] = (), node: str = "n1") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"nodeName": node, "containers": [{"name": n} for n in mains],
                     "initContainers": [{"name": n} for n in inits]},
            "status": {"containerStatuses": list(statuses)}}


def cs(restarts: int, state: str, last: bool = False, reason: str = "") -> dict[str, Any]:
    st: dict[str, Any] = {state: {"reason": reason} if reason else {}}
    return {"name": "app", "restartCount": restarts, "state": st,
            "lastState": {"terminated": {"exitCode": 1}} if last else {}}


def test_container_is_the_one_named_or_the_only_one() -> None:
    assert pick_container(pod(), "") == "app"
    assert pick_container(pod(inits=("setup",)), "setup") == "setup"
    with pytest.raises(LogError, match=r"^container nope is not valid for pod p$"):
        pick_container(pod(), "nope")
    with pytest.raises(LogError, match=r"^a container name must be specified for pod p, "
                                       r"choose one of: \[setup a b\]$"):
        pick_container(pod(mains=("a", "b"), inits=("setup",)), "")


def test_run_is_the_current_one_or_the_one_before() -> None:
    assert pick_run(pod(cs(0, "running")), "app", False) == 0
    assert pick_run(pod(cs(2, "running", last=True)), "app", False) == 2
    assert pick_run(pod(cs(2, "running", last=True)), "app", True) == 1
    # waiting to restart: the current logs and the previous ones are the run that ended
    waiting = pod(cs(3, "waiting", last=True, reason="CrashLoopBackOff"))
    assert pick_run(waiting, "app", False) == 3
    assert pick_run(waiting, "app", True) == 3


def test_upstream_errors_for_what_has_no_logs() -> None:
    with pytest.raises(LogError, match=r'^previous terminated container "app" in pod "p" '
                                       r'not found$'):
        pick_run(pod(cs(0, "running")), "app", True)
    with pytest.raises(LogError, match=r'^container "app" in pod "p" is waiting to start: '
                                       r'ContainerCreating$'):
        pick_run(pod(cs(0, "waiting", reason="ContainerCreating")), "app", False)
    with pytest.raises(LogError, match=r"is waiting to start: image can't be pulled$"):
        pick_run(pod(cs(0, "waiting", reason="ErrImagePull")), "app", False)
    with pytest.raises(LogError, match=r"is waiting to start - no logs yet$"):
        pick_run(pod(), "app", False)
    with pytest.raises(LogError, match=r"^pod p does not have a host assigned$"):
        pick_run(pod(node=""), "app", False)


def test_query_options_are_validated() -> None:
    assert options({"container": "c", "follow": "true", "tailLines": "3",
                    "limitBytes": "10"}) == LogOptions("c", True, False, 3, 10)
    for bad in ({"tailLines": "-1"}, {"limitBytes": "0"}, {"tailLines": "x"},
                {"follow": "maybe"}, {"sinceSeconds": "0"}, {"timestamps": "sometimes"}):
        with pytest.raises(LogError):
            options(bad)
    with pytest.raises(LogError, match="at most one of `sinceTime` or `sinceSeconds`"):
        options({"sinceSeconds": "5", "sinceTime": "2026-12-06T10:00:00Z"})
    for bad_time in ("yesterday", "2026-12-06 10:00:00Z", "2026-12-06T10:00:00",
                     "2026-02-30T10:00:00Z", "2026-12-06T24:00:00Z"):
        with pytest.raises(LogError, match=r"^parsing time \"[^\"]+\""):
            options({"sinceTime": bad_time})
    with pytest.raises(LogError) as bad:
        options({"sinceTime": "yesterday"})
    assert str(bad.value) == \
        'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as ' \
        '"2006"'


def test_timestamps_and_since_are_passed_on_to_the_node_agent() -> None:
    opts = options({"timestamps": "true", "sinceTime": "2026-12-06T11:00:00.5+01:00"})
    assert opts.timestamps and opts.timed
    assert opts.since_time == parse_time("2026-12-06T10:00:00.500000000Z")
    path = request_path({"metadata": {"namespace": "ns", "name": "p", "uid": "u"}}, "c", 0,
                        opts)
    again = options(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query)))
    assert again == opts
    assert options({"sinceSeconds": "60"}).since_seconds == 60
    assert not options({}).timed


def test_since_is_the_later_of_now_less_since_seconds_and_since_time() -> None:
    now = parse_time("2026-12-07T03:00:00Z")
    assert since(LogOptions(), now) is None
    assert since(LogOptions(since_seconds=60), now) == now - 60 * SECOND
    assert since(LogOptions(since_time=now - 5), now) == now - 5
    assert since(LogOptions(since_seconds=60, since_time=now - 61 * SECOND), now) == \
        now - 60 * SECOND


def test_a_time_is_printed_as_kubelet_prefixes_a_line() -> None:
    ns = parse_time("2026-12-07T03:21:02.123456789Z")  # (to the microsecond)
    assert ns % SECOND == 123456000
    assert stamp(ns + 789) == "2026-12-07T03:21:02.123456789Z"
    assert stamp(ns - ns % SECOND) == "2026-12-07T03:21:02.000000000Z"


def test_a_runtime_without_times_refuses_what_needs_them() -> None:
    assert untimed(LogOptions(tail_lines=3, follow=True)) is None
    assert "timestamps are not recorded" in str(untimed(LogOptions(timestamps=True)))
    for opts in (LogOptions(since_seconds=5), LogOptions(since_time=1)):
        assert "sinceSeconds and sinceTime cannot be served" in str(untimed(opts))


def test_stream_tails_limits_and_follows_until_the_next_run(tmp_path: Path) -> None:
    path, newer = tmp_path / "0.log", tmp_path / "1.log"
    path.write_bytes(b"a\nb\nc\n")
    assert b"".join(stream(path, LogOptions())) == b"a\nb\nc\n"
    assert b"".join(stream(path, LogOptions(tail_lines=2))) == b"b\nc\n"
    assert b"".join(stream(path, LogOptions(tail_lines=0))) == b""
    assert b"".join(stream(path, LogOptions(limit_bytes=3))) == b"a\nb"
    chunks = stream(path, LogOptions(follow=True, tail_lines=1), newer)
    assert next(chunks) == b"c\n"
    with open(path, "ab") as f:
        f.write(b"d\n")
    assert next(chunks) == b"d\n"
    with open(path, "ab") as f:
        f.write(b"last\n")
    newer.touch()  # the next run began: what the old one wrote last, then the end
    assert list(chunks) == [b"last\n"]
    stop = threading.Event()
    stop.set()
    assert list(stream(path, LogOptions(follow=True, tail_lines=0), newer=None,
                       stop=stop)) == []


def test_limited_cuts_a_stream_at_limit_bytes_or_when_stopped() -> None:
    assert list(limited(iter([b"abc", b"def", b"gh"]), 4)) == [b"abc", b"d"]
    assert list(limited(iter([b"abc", b"def"]), None)) == [b"abc", b"def"]
    stop = threading.Event()
    stop.set()
    assert list(limited(iter([b"abc", b"def"]), None, stop)) == [b"abc"]


def test_a_file_of_cri_lines_is_read_as_kubelet_reads_one(tmp_path: Path) -> None:
    path, newer = tmp_path / "0.log", tmp_path / "1.log"
    t0 = parse_time("2026-12-07T03:00:00Z")
    path.write_bytes(cri_line(t0, "stdout", b"a\n") + cri_line(t0 + SECOND, "stderr", b"b\n")
                     + cri_line(t0 + 2 * SECOND, "stdout", b"long ")
                     + cri_line(t0 + 3 * SECOND, "stdout", b"line\n"))
    assert b"".join(stream(path, LogOptions())) == b"a\nb\nlong line\n"
    assert b"".join(stream(path, LogOptions(timestamps=True))) == (
        b"2026-12-07T03:00:00.000000000Z a\n2026-12-07T03:00:01.000000000Z b\n"
        b"2026-12-07T03:00:02.000000000Z long line\n")  # (a piece's rest: no time)
    assert b"".join(stream(path, LogOptions(tail_lines=2))) == b"long line\n"
    assert b"".join(stream(path, LogOptions(since_time=t0 + SECOND))) == b"b\nlong line\n"
    assert b"".join(stream(path, LogOptions(timestamps=True, limit_bytes=33))) == \
        b"2026-12-07T03:00:00.000000000Z a\n"
    more = cri_line(t0 + 4 * SECOND, "stdout", b"more\n")
    with open(path, "ab") as f:
        f.write(more[:20])  # half a line so far, as the reader starts
    chunks = stream(path, LogOptions(follow=True, tail_lines=1), newer)
    assert next(chunks) == b"line\n"
    with open(path, "ab") as f:
        f.write(more[20:])
    newer.touch()  # the next run began: the rest, then the end
    assert list(chunks) == [b"more\n"]


def test_a_file_of_raw_output_has_no_times_to_serve(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(b"written by an earlier agent\n")
    assert b"".join(stream(path, LogOptions())) == b"written by an earlier agent\n"
    with pytest.raises(LogError, match="timestamps are not recorded"):
        b"".join(stream(path, LogOptions(timestamps=True)))


def test_the_log_writer_keeps_each_line_with_its_time_and_ends_as_its_command(
        tmp_path: Path) -> None:
    spec = {"argv": ["/bin/sh", "-c", "echo out; echo err >&2; printf tail; exit 3"],
            "env": {"PATH": "/bin:/usr/bin"}, "cwd": str(tmp_path), "uid": None, "gid": None,
            "groups": [], "memory": None}
    said_r, said_w = os.pipe()
    before = time.time_ns()
    with open(tmp_path / "0.log", "wb") as out:
        assert logshim.run(spec, out, said_w) == 3
    assert os.read(said_r, 100) == b"started"
    os.close(said_r)
    lines = (tmp_path / "0.log").read_bytes().splitlines(keepends=True)
    parsed = [parse_cri(line) for line in lines]
    assert sorted(text for _, text in parsed) == [b"err\n", b"out\n", b"tail"]
    assert all(before - 1000 <= parse_time(when.decode()) <= time.time_ns()
               for when, _ in parsed)
    said_r, said_w = os.pipe()
    with open(tmp_path / "1.log", "wb") as out:
        assert logshim.run({**spec, "cwd": str(tmp_path / "gone")}, out, said_w) == 127
    assert b"No such file or directory" in os.read(said_r, 4096)
