"""R5.12 through the Python module, on the manual clock: progress that only
repeats itself is not progress, judged in the core as from Rust and Node."""

import pytest

import stallwarden as sg


def stalls(rec, name):
    return [e for e in rec.events if e["type"] == "stalled" and e["task"] == name]


def test_a_wait_loop_written_through_write_stalls_and_says_what_repeats(manual):
    guard, rec = manual
    t = guard.start("wait", idle="10s", heartbeat_interval="off", terminate_after=0)
    for i in range(12):
        t.write(f"[12:00:{i:02}] waiting for db (attempt {i})\n")
        guard.advance(1000)
    guard.flush()
    (stalled,) = stalls(rec, "wait")
    assert stalled["elapsed_ms"] == 10_000
    assert stalled["repeating"]["source"] == "output"
    assert stalled["repeating"]["shown"] == "[12:00:01] waiting for db (attempt 1)"
    assert stalled["repeating"]["count"] == 10
    assert t.status()["total_lines"] == 12


def test_its_busy_twin_whose_counter_advances_never_stalls(manual):
    guard, rec = manual
    t = guard.start("busy", idle="10s", heartbeat_interval="off", terminate_after=0)
    for i in range(30):
        t.write(f"[12:00:{i:02}] progress {i + 1}/30\n".encode())
        guard.advance(5000)
    guard.flush()
    assert stalls(rec, "busy") == []


def test_the_same_call_with_the_same_result_stalls_naming_it(manual):
    guard, rec = manual
    t = guard.start("agent", idle="10s", heartbeat_interval="off", terminate_after=0)
    for i in range(8):
        t.tool_started(f"c{i}", "Bash(cat config.yaml)", {"command": "cat config.yaml"})
        guard.advance(1000)
        t.tool_finished(f"c{i}", "success", "port: 8080\n")
        guard.advance(1000)
    guard.flush()
    (stalled,) = stalls(rec, "agent")
    assert stalled["repeating"]["source"] == "tool-call"
    assert stalled["repeating"]["shown"] == "Bash(cat config.yaml)"


def test_the_same_test_command_with_improving_results_is_progress(manual):
    guard, rec = manual
    t = guard.start("agent", idle="10s", heartbeat_interval="off", terminate_after=0)
    for i in range(10):
        t.tool_started(f"t{i}", "Bash(pytest)", {"command": "pytest -q"})
        guard.advance(3000)
        t.tool_finished(f"t{i}", "success", f"{10 - i} failed, {i} passed".encode())
        guard.advance(3000)
    guard.flush()
    assert stalls(rec, "agent") == []


def test_repeat_without_output_in_renewed_by_is_refused_and_write_takes_text_only(manual):
    guard, _ = manual
    with pytest.raises(ValueError, match="add `output` too"):
        guard.start("bad", renewed_by=["repeat", "tool-call"])
    t = guard.start("old", renewed_by=["output", "repeat"])
    with pytest.raises(ValueError, match="expected str or bytes, got int"):
        t.write(3)
