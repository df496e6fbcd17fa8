"""Cancellation reaches a real running coroutine (R11.1, R3.5), on the real
clock: the budgets are short and the bounds generous."""

import asyncio
import time

import stallwarden as sg


def test_await_cancelled_cancels_a_real_running_coroutine():
    events = []
    guard = sg.Guard(on_event=events.append)

    async def tool_call():
        # A tool that goes silent: no output, no heartbeat.
        await asyncio.sleep(30)
        return "finished on its own"

    async def main():
        t = guard.start("turn-1", idle="200ms", heartbeat_interval="off")
        work = asyncio.create_task(tool_call())
        started = time.monotonic()
        done, _ = await asyncio.wait(
            [work, asyncio.ensure_future(t.cancelled())],
            return_when=asyncio.FIRST_COMPLETED,
        )
        assert work not in done, "the silent tool finished before the stall"
        work.cancel()
        try:
            await work
        except asyncio.CancelledError:
            pass
        t.finish("cancelled")
        return t, time.monotonic() - started

    t, waited = asyncio.run(main())
    assert t.is_cancelled
    assert 0.15 < waited < 10, waited
    guard.flush()
    assert [e["type"] for e in events] == ["started", "stalled", "cancelling", "finished"]


def test_cancelled_completes_at_once_when_already_cancelled():
    guard = sg.Guard()

    async def main():
        t = guard.start("t", idle="1s")
        t.cancel("user asked")
        guard.flush()
        await asyncio.wait_for(t.cancelled(), 5)
        t.finish("cancelled")

    asyncio.run(main())
