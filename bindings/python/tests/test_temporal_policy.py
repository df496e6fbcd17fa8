"""When a guarded activity heartbeats Temporal (R6.9, R3.7), checked inside
Temporal's ActivityEnvironment (no server): progress earns a heartbeat, at
most one per interval; idle silence earns none even while the engine says
"still running"; a silent tool call in flight does. Waits are for the
engine's own events, bounded."""

import asyncio
import dataclasses
import os
import time
import uuid
from datetime import timedelta

import pytest

pytest.importorskip("temporalio", reason="the Temporal SDK is not installed: pip install temporalio")
from temporalio.testing import ActivityEnvironment  # noqa: E402

from stallwarden.temporal import GuardedTurn, Profile, guarded_activity  # noqa: E402

BOUND = 30.0


def environment(**info):
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        ActivityEnvironment.default_info(),
        workflow_id=f"wf-{uuid.uuid4().hex[:8]}",
        heartbeat_timeout=timedelta(seconds=3),
        **info,
    )
    beats = []
    env.on_heartbeat = lambda *details: beats.append((time.monotonic(), details[0]))
    return env, beats


def members(pgid):
    """The group's members that are not zombies, from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(int(pid))
    return found


async def until(pred):
    deadline = time.monotonic() + BOUND
    while not pred():
        assert time.monotonic() < deadline, "the engine never emitted what was awaited"
        await asyncio.sleep(0.02)


def test_a_burst_of_progress_earns_one_heartbeat_per_interval_and_idle_silence_none():
    env, beats = environment()

    @guarded_activity(profile=Profile(idle="30s"))
    async def turn_fn(turn: GuardedTurn) -> int:
        for _ in range(500):
            turn.output(10, 1)
        assert len(beats) == 1  # at once; the rest wait for the interval
        # Idle silence: the engine says "still running" (R3.7), which is
        # no proof of progress outside a tool call: nothing more is sent
        # but the one heartbeat the burst earned, at the interval.
        await until(lambda: turn.engine_heartbeats >= 2)
        return turn.interval

    interval = asyncio.run(env.run(turn_fn))
    assert interval == 1.0  # a third of the 3 s heartbeat timeout
    assert [d["source"] for _, d in beats] == ["progress", "progress"]
    assert beats[1][0] - beats[0][0] >= interval * 0.99
    last = beats[1][1]
    assert last["total_lines"] == 500 and last["total_bytes"] == 5000
    assert last["attempt"] == 1 and last["tools"] == [] and last["type"] == "heartbeat"
    assert "idle_remaining_ms" in last and "elapsed_ms" in last


def test_a_silent_tool_call_in_flight_heartbeats_on_the_engines_events():
    env, beats = environment()

    @guarded_activity(profile=Profile(idle="1s", execution="20s"))
    async def turn_fn(turn: GuardedTurn) -> dict:
        tool = asyncio.ensure_future(turn.run_tool(["sleep", "30"], name="bash", call_id="c1"))
        await until(lambda: any(d["source"] == "engine" for _, d in beats))
        tool.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tool
        return turn.heartbeats

    counts = asyncio.run(env.run(turn_fn))
    assert counts["engine"] >= 1
    engine = next(d for _, d in beats if d["source"] == "engine")
    assert engine["tools"][0]["name"] == "bash" and engine["tools"][0]["pid"] > 1
    assert engine["total_lines"] == 0 and "elapsed_ms" in engine
    stamps = [t for t, _ in beats]
    assert all(b - a >= 0.99 for a, b in zip(stamps, stamps[1:])), stamps


def test_the_next_attempt_gets_the_previous_heartbeat_and_resumes_its_checkpoint():
    env, beats = environment(attempt=2, heartbeat_details=[{"checkpoint": 7, "worker": "w-a"}])

    @guarded_activity(profile={"idle": "30s"})
    async def turn_fn(turn: GuardedTurn) -> dict:
        turn.output(1, 1)
        return turn.previous

    assert asyncio.run(env.run(turn_fn)) == {"checkpoint": 7, "worker": "w-a"}
    assert beats[0][1]["checkpoint"] == 7 and beats[0][1]["attempt"] == 2


def test_bad_profiles_and_functions_are_refused_with_what_was_wrong():
    with pytest.raises(ValueError, match=r"profile: unknown key\(s\) \['idel'\]"):
        Profile.of({"idel": "1s"})

    with pytest.raises(TypeError, match="must be an async function"):
        guarded_activity(lambda turn: None)


def test_an_idle_stall_outside_a_tool_interrupts_the_body_with_a_typed_error():
    # R6.9, R2.1: the body awaits a model that never answers; the idle
    # verdict cancels it and the attempt leaves as ApplicationError(Stalled).
    from temporalio.exceptions import ApplicationError

    env, beats = environment()

    @guarded_activity(profile=Profile(idle="1s", retry_on_stall=True))
    async def turn_fn(turn: GuardedTurn) -> None:
        turn.argument_delta()
        turn.checkpoint("half-way")
        await asyncio.Event().wait()

    with pytest.raises(ApplicationError) as raised:
        asyncio.run(env.run(turn_fn))
    e = raised.value
    assert e.type == "Stalled" and not e.non_retryable
    d = e.details[0]
    assert d["verdict"] == "stalled" and d["budget"] == "idle" and d["budget_ms"] == 1000
    assert d["silent_ms"] >= 1000 and d["checkpoint"] == "half-way" and d["last_call"] is None
    assert e.message.startswith("stalled; idle budget 1s; silent ")
    assert [b["source"] for _, b in beats] == ["progress"]  # none after the stall (R3.8)


def test_temporals_cancel_cancels_the_task_and_stops_the_tools_group():
    # R6.9, R3.5: ActivityEnvironment.cancel() is what a worker does on a
    # cancel request; the tool's group goes and the cancel propagates.
    env, beats = environment()
    seen = {}

    @guarded_activity(profile=Profile(idle="30s"))
    async def turn_fn(turn: GuardedTurn) -> None:
        seen["turn"] = turn
        await turn.run_tool(["sh", "-c", "sleep 30 & sleep 30; wait"], name="bash")

    async def main():
        work = asyncio.ensure_future(env.run(turn_fn))
        await until(lambda: "turn" in seen and seen["turn"]._tools)
        pid = next(iter(seen["turn"]._tools.values()))[1]
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await work
        return pid

    pid = asyncio.run(main())
    assert members(pid) == []  # gone (zombies aside) before the cancel propagated
    assert seen["turn"].task.is_cancelled
    assert seen["turn"].task.status() is None  # finished
