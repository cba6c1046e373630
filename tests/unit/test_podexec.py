"""The exec and attach rules (``shared.api.podexec``): a query's options, the container, the
frames of the agent's leg, the Status that ends a session."""

from __future__ import annotations

import io
import json

import pytest

from shared.api import podexec


def q(query: str) -> dict[str, list[str]]:
    return podexec.parse_query(query)


def test_options_take_each_word_of_the_command_in_order() -> None:
    opts = podexec.options(q("command=sh&command=-c&command=echo+a%26b&container=app"
                             "&stdin=true&stdout=true&stderr=true&tty=false"))
    assert opts == podexec.ExecOptions(("sh", "-c", "echo a&b"), "app", True, True, True,
                                       False)


def test_a_terminal_carries_stderr_on_stdout() -> None:
    opts = podexec.options(q("command=sh&stdin=1&stdout=1&stderr=1&tty=1"))
    assert (opts.tty, opts.stdout, opts.stderr) == (True, True, False)


@pytest.mark.parametrize(("query", "message"), [
    ("stdout=true", "you must specify at least one command for the container"),
    ("command=&stdout=true", "you must specify at least one command for the container"),
    ("command=ls", "you must specify at least 1 of stdin, stdout, stderr"),
    ("command=ls&stdout=maybe", "stdout: invalid value 'maybe', want true or false"),
])
def test_options_refused(query: str, message: str) -> None:
    with pytest.raises(podexec.ExecError, match=message.replace("$", r"\$")):
        podexec.options(q(query))


def pod(phase: str = "Running", node: str = "n1", containers: int = 1) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {"nodeName": node, "initContainers": [{"name": "init"}],
                     "containers": [{"name": f"c{i}"} for i in range(containers)]},
            "status": {"phase": phase}}


def test_the_container_is_the_one_named_or_the_only_one() -> None:
    assert podexec.pick_container(pod(), "") == "c0"
    assert podexec.pick_container(pod(containers=2), "c1") == "c1"
    with pytest.raises(podexec.ExecError, match=r"a container name must be specified for pod "
                       r"p, choose one of: \[init c0 c1\]"):
        podexec.pick_container(pod(containers=2), "")
    with pytest.raises(podexec.ExecError, match="container x is not valid for pod p"):
        podexec.pick_container(pod(), "x")
    with pytest.raises(podexec.ExecError, match="pod p does not have a host assigned"):
        podexec.pick_container(pod(node=""), "")
    with pytest.raises(podexec.ExecError, match="cannot exec into a container in a completed "
                       "pod; current phase is Succeeded"):
        podexec.pick_container(pod("Succeeded"), "")


def test_the_agents_request_names_the_pod_its_uid_and_each_word() -> None:
    opts = podexec.options(q("command=cat&command=/a b&stdin=1&stdout=1"))
    path = podexec.request_path(pod(), "c0", opts)
    assert path == "/exec/ns/p/c0?uid=u-1&command=cat&command=%2Fa+b&stdin=1&stdout=1"
    assert podexec.options(q(path.split("?", 1)[1])) == opts


def test_an_attach_is_a_session_without_a_command_on_the_current_run() -> None:
    opts = podexec.attach_options(q("container=c0&stdout=true&stderr=true&tty=false"))
    assert opts == podexec.ExecOptions((), "c0", False, True, True, False)
    with pytest.raises(podexec.ExecError, match="at least 1 of stdin, stdout, stderr"):
        podexec.attach_options(q("container=c0"))
    with pytest.raises(podexec.ExecError, match="cannot attach to a container in a completed "
                       "pod; current phase is Failed"):
        podexec.pick_container(pod("Failed"), "", "attach to")
    running = pod()
    running["status"]["containerStatuses"] = [{"name": "c0", "restartCount": 3,
                                                "state": {"running": {}}}]
    path = podexec.request_path(running, "c0", opts)
    assert path == "/attach/ns/p/c0?uid=u-1&run=3&stdout=1&stderr=1"
    # (the container is in the path)
    assert podexec.attach_options(q(path.split("?", 1)[1])) == \
        podexec.ExecOptions((), "", False, True, True, False)


def test_frames_read_back_as_written_and_a_cut_frame_is_an_error() -> None:
    data = podexec.frame(podexec.STDOUT, b"out") + podexec.frame(podexec.CLOSE, b"\0")
    stream = io.BytesIO(data)
    assert podexec.read_frame(stream.read) == (podexec.STDOUT, b"out")
    assert podexec.read_frame(stream.read) == (podexec.CLOSE, b"\0")
    assert podexec.read_frame(stream.read) is None
    with pytest.raises(podexec.ExecError, match="ended inside a frame"):
        podexec.read_frame(io.BytesIO(data[:6]).read)
    with pytest.raises(podexec.ExecError, match="larger than"):
        podexec.read_frame(io.BytesIO(bytes([1]) + (1 << 30).to_bytes(4, "big")).read)


def test_terminal_size() -> None:
    assert podexec.terminal_size(b'{"Width":91,"Height":33}') == (91, 33)
    for bad in (b"", b"{}", b'{"Width":0,"Height":3}', b'{"Width":"x","Height":3}', b"[]"):
        assert podexec.terminal_size(bad) is None


def test_the_ending_status_is_kubelets() -> None:
    assert podexec.ended(["true"], 0) == {"metadata": {}, "status": "Success"}
    failed = podexec.ended(["sh", "-c", "exit 3"], 3)
    assert failed["reason"] == "NonZeroExitCode"
    assert failed["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    internal = podexec.failed("exec: nope")
    assert internal["code"] == 500 and internal["reason"] == "InternalError"
    assert json.loads(podexec.status_data(internal)) == internal
