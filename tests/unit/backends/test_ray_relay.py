"""The relay's mailboxes (runner/backends/ray/relay.py), driven without Ray: order, end of
output, commands, and a closed mailbox telling the node to stop."""

from __future__ import annotations

import asyncio

from runner.backends.ray.relay import Relay


def test_frames_come_out_in_order_then_the_end() -> None:
    async def body() -> None:
        relay = Relay()
        await relay.open("k")
        assert await relay.read_output("k", 0.01) == ([], False)
        assert await relay.put_output("k", [(1, b"a")], False)
        assert await relay.put_output("k", [(2, b"b"), (1, b"c")], True)
        assert await relay.read_output("k", 0.01) == ([(1, b"a"), (2, b"b"), (1, b"c")], True)
        assert await relay.read_output("k", 0.01) == ([], True)

    asyncio.run(body())


def test_a_waiting_reader_wakes_when_a_frame_arrives() -> None:
    async def body() -> None:
        relay = Relay()
        await relay.open("k")
        reader = asyncio.ensure_future(relay.read_output("k", 5.0))
        await asyncio.sleep(0.01)
        await relay.put_output("k", [(1, b"x")], False)
        assert await asyncio.wait_for(reader, 1.0) == ([(1, b"x")], False)

    asyncio.run(body())


def test_commands_and_start_reach_their_side_and_a_closed_mailbox_says_close() -> None:
    async def body() -> None:
        relay = Relay()
        await relay.open("k")
        assert await relay.wait_started("k", 0.01) is None
        await relay.started("k", {"node": "n1"})
        assert await relay.wait_started("k", 0.01) == {"node": "n1"}
        assert await relay.command("k", ("write", b"x", 1.0))
        assert await relay.command("k", ("kill",))
        assert await relay.take_commands("k", 0.01) == [("write", b"x", 1.0), ("kill",)]
        await relay.close("k")
        assert await relay.take_commands("k", 0.01) == [("close",)]
        assert not await relay.command("k", ("kill",))
        assert not await relay.put_output("k", [(1, b"late")], False)
        assert await relay.read_output("k", 0.01) == ([], True)

    asyncio.run(body())
