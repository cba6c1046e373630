"""The wait of an exec's input on the node agent (``podexec._drained``): it ends with the
agent taking the input, with the caller gone, and with the session's end (a cancel), even one
that comes as the agent takes the input."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from aiohttp import web

from services.apiserver import podexec


class _Writer:
    """An agent's connection whose input is taken when ``taken`` is."""

    def __init__(self) -> None:
        self.taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def drain(self) -> None:
        await self.taken


class _Transport:
    """The caller's connection; ``looked`` is done once it was looked at three times."""

    def __init__(self) -> None:
        self.closing = False
        self.looks = 0
        self.looked: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def is_closing(self) -> bool:
        self.looks += 1
        if self.looks == 3:
            self.looked.set_result(None)
        return self.closing

    def get_extra_info(self, name: str) -> None:
        return None  # (no socket to look at)


def _request(transport: _Transport) -> web.Request:
    return cast(web.Request, type("Request", (), {"transport": transport})())


async def _probe() -> None:
    pass


def _drained(writer: _Writer, transport: _Transport,
             probe: Callable[[], Awaitable[None]] = _probe) -> asyncio.Task[bool]:
    return asyncio.ensure_future(podexec._drained(cast(Any, writer), _request(transport),
                                                  probe))


def test_input_wait_ends_when_the_agent_takes_it_or_the_caller_goes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podexec, "CALLER_CHECK", 0.01)

    async def scenario() -> tuple[bool, bool]:
        writer, transport = _Writer(), _Transport()
        waiting = _drained(writer, transport)
        await transport.looked  # (the caller still there)
        assert not waiting.done()
        writer.taken.set_result(None)
        taken = await waiting
        transport.closing = True
        gone = await _drained(_Writer(), transport)
        return taken, gone

    assert asyncio.run(scenario()) == (True, False)


def test_input_wait_ends_when_a_ping_to_the_caller_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that went while sending more input is not seen closing (its connection
    waits to send that first): the ping the wait sends it fails instead."""
    monkeypatch.setattr(podexec, "CALLER_CHECK", 0.01)
    pings = []

    async def ping() -> None:
        pings.append(1)
        if len(pings) == 3:
            raise ConnectionResetError("reset by peer")

    async def scenario() -> bool:
        return await _drained(_Writer(), _Transport(), ping)

    assert asyncio.run(scenario()) is False
    assert len(pings) == 3


def test_input_wait_ends_with_a_cancel_that_comes_as_the_agent_takes_it() -> None:
    async def scenario() -> None:
        writer = _Writer()
        waiting = _drained(writer, _Transport())
        await asyncio.sleep(0)  # (waiting on the drain)
        # the session ends as the agent takes the input: the cancel runs first
        writer.taken.add_done_callback(lambda _: waiting.cancel())
        writer.taken.set_result(None)
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(scenario())
