"""The workflow and guarded activities test_temporal.py runs on real workers
(R6.9). Run as a worker process: `python temporal_app.py ADDRESS QUEUE
IDENTITY`; it prints "ready" once polling."""

import asyncio
import pathlib
import sys
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from stallwarden.temporal import GuardedTurn, Profile, guarded_activity

# A real recording (sources/tests/fixtures/recorded/SOURCES.md); found when
# an activity runs (a workflow sandbox allows no file system access).
STREAM = "sources/tests/fixtures/recorded/anthropic/anthropic-programmatic-tool-calling.1.chunks.txt"


async def model_stream(turn: GuardedTurn, start: int = 0, gap: float = 0.0) -> int:
    """Feeds a real recorded Anthropic stream (R5.2) from line `start`; a
    refused event (the recording has one empty delta) is no progress."""
    stream = turn.anthropic_stream()
    lines = (pathlib.Path(__file__).resolve().parents[3] / STREAM).read_text().splitlines()
    for line in lines[start:]:
        try:
            stream.feed(line)
        except ValueError:
            pass
        if gap:
            await asyncio.sleep(gap)
    return stream.accepted


def report(turn: GuardedTurn, **more):
    return {
        "worker": turn.worker,
        "attempt": turn.attempt,
        "previous": turn.previous,
        "heartbeats": dict(turn.heartbeats),
        "elapsed_ms": turn.task.status()["elapsed_ms"],
        **more,
    }


@activity.defn
@guarded_activity(profile=Profile(idle="1s", execution="20s"))
async def silent_tool(turn: GuardedTurn, seconds: float) -> dict:
    """A healthy tool call, silent for longer than the heartbeat timeout."""
    await model_stream(turn)
    result = await turn.run_tool(["sleep", str(seconds)], name="bash")
    return report(turn, returncode=result.returncode)


@activity.defn
@guarded_activity(profile=Profile(idle="30s"))
async def wedge_once(turn: GuardedTurn) -> dict:
    """Attempt 1 streams, then wedges: the event loop is alive (a timer
    heartbeat would go on) but nothing progresses. Later attempts finish."""
    accepted = await model_stream(turn)
    turn.checkpoint({"accepted": accepted})
    if turn.attempt == 1:
        # Wedged so hard it does not hear a cancel either (Temporal's SDK
        # cancels an attempt locally once its heartbeat timeout passes): it
        # keeps its worker's one slot, so the retry must run elsewhere.
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                continue
    return report(turn, accepted=accepted)


@activity.defn
@guarded_activity(profile=Profile(idle="1s", execution="2s", retry_on_stall=False))
async def stall_in_tool(turn: GuardedTurn) -> dict:
    """A tool call that hangs (a shell waiting on a silent `sleep`)."""
    await model_stream(turn)
    await turn.run_tool(["sh", "-c", "sleep 30; true"], name="bash", call_id="toolu_hang")
    return report(turn)


@activity.defn
@guarded_activity(profile=Profile(idle="2s", execution="60s"))
async def long_tool(turn: GuardedTurn) -> dict:
    """A silent tool whose process group has two members."""
    result = await turn.run_tool(["sh", "-c", "sleep 60 & sleep 60; wait"], name="bash")
    return report(turn, returncode=result.returncode)


@activity.defn
@guarded_activity(profile=Profile(idle="3s", execution="30s"))
async def resumable(turn: GuardedTurn, upto: int) -> dict:
    """Counts to `upto` in a tool, a line every 0.2 s, resuming after the
    last line a previous attempt reported in its heartbeat."""
    start = ((turn.previous or {}).get("checkpoint") or 0) + 1
    await model_stream(turn)
    script = f"for i in $(seq {start} {upto}); do echo $i; sleep 0.2; done"
    result = await turn.run_tool(
        ["sh", "-c", script], name="bash", on_line=lambda line: turn.checkpoint(int(line))
    )
    return report(turn, first=start, lines=result.stdout.decode().split())


@workflow.defn
class TurnWorkflow:
    """Runs one guarded activity by name with the given timeouts."""

    @workflow.run
    async def run(self, spec: dict) -> dict:
        return await workflow.execute_activity(
            spec["activity"],
            args=spec.get("args", []),
            start_to_close_timeout=timedelta(seconds=spec.get("start_to_close", 90)),
            heartbeat_timeout=timedelta(seconds=spec["heartbeat_timeout"]),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200),
                backoff_coefficient=1.0,
                maximum_attempts=spec.get("max_attempts", 3),
            ),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )


ACTIVITIES = [silent_tool, wedge_once, stall_in_tool, long_tool, resumable]


async def serve(address: str, queue: str, identity: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(address, identity=identity)
    # One activity at a time: a wedged attempt keeps its worker busy, so the
    # retry goes to another worker, as it would across a fleet.
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[TurnWorkflow],
        activities=ACTIVITIES,
        max_concurrent_activities=1,
        # A killed worker's sticky workflow cache is given up on quickly.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:4]))
