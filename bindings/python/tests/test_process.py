"""A task's process group, stopped by the process sink on a cancel (R3.5)
and named in stall events (R5.5): real processes, real signals, bounded
polling on the real clock."""

import os
import subprocess
import time

import pytest

import stallwarden as sg

BOUND = 30.0


def wait_until(pred):
    deadline = time.monotonic() + BOUND
    while not pred():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.02)


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


def test_a_cancel_stops_the_attached_group_through_the_process_sink():
    events = []
    guard = sg.Guard(on_event=events.append, process_groups=True)
    tool = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30; wait"], start_new_session=True)
    try:
        t = guard.start("turn", idle="30s", grace_period="5s")
        t.attach_process(tool.pid)
        wait_until(lambda: len(members(tool.pid)) >= 3)  # sh and its two sleeps
        t.cancel("the user asked")
        assert tool.wait(BOUND) == -15  # SIGTERM to the group, not just the leader
        wait_until(lambda: not members(tool.pid))
        t.finish("cancelled")
    finally:
        if tool.poll() is None:
            os.killpg(tool.pid, 9)
            tool.wait()
    guard.flush()
    assert [e["type"] for e in events] == ["started", "cancelling", "finished"]


def test_the_native_group_members_are_the_live_members_of_a_real_group():
    # R10.7: stallwarden.temporal's tools ask the engine's one reader of the
    # process table; it agrees with this test's own reading, leaves a
    # zombie out, and finds nothing once the group is gone.
    from stallwarden._native import _group_members

    tool = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30; wait"], start_new_session=True)
    try:
        wait_until(lambda: len(members(tool.pid)) >= 3)  # sh and its two sleeps
        assert sorted(_group_members(tool.pid)) == sorted(members(tool.pid))
        assert tool.pid in _group_members(tool.pid)
        os.killpg(tool.pid, 9)
        wait_until(lambda: not _group_members(tool.pid))  # the unreaped leader is a zombie
    finally:
        if tool.poll() is None:
            os.killpg(tool.pid, 9)
        tool.wait()
    assert _group_members(tool.pid) == []


def test_without_process_groups_a_cancel_signals_nothing():
    guard = sg.Guard()
    tool = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        t = guard.start("turn", idle="30s")
        t.attach_process(tool.pid, sample_every="off")
        t.cancel("the user asked")
        guard.flush()
        assert tool.poll() is None
        t.finish("cancelled")
    finally:
        tool.kill()
        tool.wait()


def test_a_stall_names_the_silent_children_of_the_attached_process():
    events = []
    guard = sg.Guard(on_event=events.append, process_groups=True)
    tool = subprocess.Popen(["sh", "-c", "sleep 30; true"], start_new_session=True)
    try:
        t = guard.start("turn", idle="2500ms", heartbeat_interval="off")
        t.tool_started("c1", "bash")
        t.attach_process(tool.pid, sample_every="1s")
        tool.wait(BOUND)
        t.finish("cancelled")
    finally:
        if tool.poll() is None:
            os.killpg(tool.pid, 9)
            tool.wait()
    guard.flush()
    stalled = next(e for e in events if e["type"] == "stalled")
    # R8.13: the attached process itself is named too, first, with what it
    # is blocked on (its child), then its silent child.
    assert [c["name"] for c in stalled["children"]] == ["sh", "sleep"]
    sh, sleep = stalled["children"]
    assert sh["blocked_on"].startswith("waiting for child sleep["), sh
    assert sleep["cpu_delta_ms"] == 0


def test_attach_process_refuses_what_is_not_a_group_leader_pid():
    t = sg.Guard().start("turn")
    with pytest.raises(ValueError, match=r"pid: expected a process group leader's pid \(> 1\), got 1"):
        t.attach_process(1)
    with pytest.raises(ValueError, match="sample_every"):
        t.attach_process(os.getpid(), sample_every="90s")
    t.finish()
