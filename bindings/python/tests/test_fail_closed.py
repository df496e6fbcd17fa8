"""Failures fail closed through the Python module (R10.5): a guard whose
thread cannot start raises, and flush is bounded by its timeout."""

import os
import subprocess
import sys
import threading

import pytest

import stallwarden as sg

# A child process whose Rust threads all ask for a stack larger than the
# address space: std::thread::Builder::spawn then fails as it does when the
# system is out of threads or memory.
NO_THREADS = dict(os.environ, RUST_MIN_STACK=str(1 << 47))

CHILD = """
import stallwarden
try:
    stallwarden.Guard(clock={clock!r})
except RuntimeError as e:
    print("raised:", e)
else:
    print("built a guard")
"""


@pytest.mark.parametrize("clock", ["real", "manual"])
def test_a_guard_whose_thread_cannot_start_raises(clock):
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(clock=clock)],
        env=NO_THREADS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    # The sink thread (started first) or the driver: either way an error
    # naming the thread and the system's reason, never a silent guard.
    assert child.stdout.startswith("raised: stallwarden: could not start thread `stallwarden-"), child
    assert "os error" in child.stdout, child.stdout


def test_flush_raises_timeout_error_when_on_event_hangs():
    release = threading.Event()
    seen = []

    def on_event(event):
        seen.append(event["type"])
        release.wait(60)

    guard = sg.Guard(clock="manual", on_event=on_event)
    task = guard.start("hung", heartbeat_interval="off")
    with pytest.raises(TimeoutError, match=r"flush: on_event did not catch up within 200ms"):
        guard.flush(timeout=200)
    release.set()
    guard.flush()  # the default 5 s: it has caught up now
    assert seen == ["started"]
    task.finish("completed")
    guard.flush(timeout="30s")
    assert seen == ["started", "finished"]


def test_flush_refuses_an_unbounded_timeout():
    guard = sg.Guard(clock="manual")
    with pytest.raises(ValueError, match="timeout: a flush is bounded"):
        guard.flush(timeout="off")
    with pytest.raises(ValueError, match="timeout: .*non-negative.*; got -1"):
        guard.flush(timeout=-1)
