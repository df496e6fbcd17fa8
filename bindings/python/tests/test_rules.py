"""The engine's rules through the Python module, on the manual clock (R11.1).

Every timing here is virtual: the guard only moves when `advance` is called,
and `flush` waits until the events reached the callback.
"""

import datetime

import pytest

import stallwarden as sg
from conftest import recorded


def test_idle_budget_renewed_by_output_and_stalls_exactly_at_the_budget(manual):
    # R2.1
    guard, rec = manual
    t = guard.start("t", idle="100ms", heartbeat_interval="off")
    guard.advance(90)
    t.output(10, 1)
    guard.advance(99)
    guard.flush()
    assert rec.types() == ["started"]
    guard.advance(1)
    guard.flush()
    assert rec.types() == ["started", "stalled", "cancelling"]
    stalled = rec.events[1]
    assert stalled["budget"] == "idle"
    assert stalled["silent_ms"] == 100
    assert stalled["strike"] == 1


def test_execution_budget_holds_a_silent_tool_until_the_last_call_finishes(manual):
    # R2.2: a 165 s silent SQL probe is legitimate.
    guard, rec = manual
    t = guard.start("t", idle="60s", execution="10m", heartbeat_interval="off")
    t.tool_started("call_1", "sql_probe")
    t.tool_started("call_2", "grep")
    guard.advance(165_000)
    t.tool_finished("call_1", "success")
    guard.advance(200_000)
    guard.flush()
    assert rec.types() == ["started"]
    t.tool_finished("call_2", "failure")
    guard.advance(60_000)
    guard.flush()
    assert rec.types() == ["started", "stalled", "cancelling"]
    assert rec.events[1]["budget"] == "idle"
    assert t.status()["last_call"]["name"] == "grep"


def test_strikes_rearm_from_the_verdict_and_cancel_at_terminate_after(manual):
    # R3.2
    guard, rec = manual
    t = guard.start("t", idle="1s", terminate_after=2, heartbeat_interval="off")
    guard.advance(1000)
    guard.flush()
    assert rec.types() == ["started", "stalled"]
    assert not t.is_cancelled
    guard.advance(999)
    guard.flush()
    assert rec.types() == ["started", "stalled"]
    guard.advance(1)
    guard.flush()
    assert rec.types() == ["started", "stalled", "stalled", "cancelling"]
    assert [e.get("strike") for e in rec.events[1:3]] == [1, 2]
    assert t.is_cancelled


def test_progress_after_a_stall_recovers_and_resets_the_strikes(manual):
    # R3.3
    guard, rec = manual
    t = guard.start("t", idle="1s", terminate_after=2, heartbeat_interval="off")
    guard.advance(1500)
    t.argument_delta()
    guard.flush()
    assert rec.types() == ["started", "stalled", "recovered"]
    assert rec.events[2]["silent_ms"] == 1500
    assert t.status()["strikes"] == 0


def test_a_deadline_cancels_at_once_without_strikes(manual):
    # R3.4 and R2.4: total time, never renewed by output.
    guard, rec = manual
    t = guard.start("t", idle="10s", deadline="3s", terminate_after=5, heartbeat_interval="off")
    for _ in range(6):
        guard.advance(500)
        t.output(1, 0)
    guard.flush()
    assert rec.types() == ["started", "deadline_exceeded", "cancelling"]
    assert t.is_cancelled


def test_cancel_then_kill_after_the_grace_period(manual):
    # R3.5: after the cancel no signal renews anything.
    guard, rec = manual
    t = guard.start("t", idle="1s", grace_period="2s", heartbeat_interval="off")
    guard.advance(1000)
    t.output(100, 3)
    guard.advance(1999)
    guard.flush()
    assert rec.types() == ["started", "stalled", "cancelling"]
    guard.advance(1)
    guard.flush()
    assert rec.types() == ["started", "stalled", "cancelling", "killed"]


def test_finished_is_the_last_event_exactly_once(manual):
    # R3.8: nothing after `finished`, and no heartbeat while cancelling.
    guard, rec = manual
    t = guard.start("t", idle="5s", heartbeat_interval="1s", grace_period="10s")
    guard.advance(5000)
    guard.advance(5000)
    t.finish("cancelled")
    with pytest.raises(ValueError):
        t.finish("completed")
    guard.advance(60_000)
    guard.flush()
    types = rec.types()
    assert types[-1] == "finished"
    assert types.count("finished") == 1
    assert "heartbeat" in types, "silent intervals before the stall beat"
    cancel_at = types.index("cancelling")
    assert "heartbeat" not in types[cancel_at:]
    assert rec.events[-1]["outcome"] == "cancelled"


def test_a_with_block_finishes_completed_or_failed(manual):
    guard, rec = manual
    with guard.start("ok", idle="1s"):
        pass
    with pytest.raises(RuntimeError):
        with guard.start("boom", idle="1s"):
            raise RuntimeError("tool crashed")
    guard.flush()
    outcomes = {e["task"]: e["outcome"] for e in rec.events if e["type"] == "finished"}
    assert outcomes == {"ok": "completed", "boom": "failed"}


def test_a_recorded_anthropic_stream_renews_on_every_genuine_delta(manual):
    # R5.2: a real recording (sources/tests/fixtures/recorded/SOURCES.md),
    # 10 ms between events under a 100 ms budget: every delta renews.
    guard, rec = manual
    t = guard.start("t", idle="100ms", heartbeat_interval="off")
    stream = t.anthropic_stream()
    steps = []
    for line in recorded("anthropic/anthropic-programmatic-tool-calling.1.chunks.txt"):
        try:
            steps.append(stream.feed(line))
        except ValueError as e:
            steps.append(str(e))
        guard.advance(10)
    assert steps.count("renewed") == 142 == stream.accepted
    assert stream.rejections == {"args.empty_delta": 1}
    assert any("empty_delta" in s for s in steps)
    guard.flush()
    assert t.status()["refused"] == {"args.empty_delta": 1}


def test_stream_adapters_take_str_bytes_or_dicts_and_refuse_with_the_reason(manual):
    # R5.9: the Responses API; unknown events are ignored, malformed ones refused.
    guard, _ = manual
    t = guard.start("t", idle="1s")
    s = t.responses_stream()
    assert s.feed({"type": "response.created", "response": {"id": "resp_1"}}) == "tracked"
    added = b'{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"c1","name":"bash"}}'
    assert s.feed(added) == "tracked"
    assert s.feed('{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{\\"cmd\\""}') == "renewed"
    assert s.feed('{"type":"response.output_text.delta","delta":"hi"}') == "ignored"
    with pytest.raises(ValueError, match="malformed_event"):
        s.feed('{"type":"response.function_call_arguments.delta"}')
    with pytest.raises(ValueError, match="invalid_json"):
        s.feed("not json")
    assert t.openai_stream().feed("[DONE]") == "ignored"


@pytest.mark.parametrize(
    "value",
    ["60s", "1h 30m", 250, 2.5, datetime.timedelta(seconds=3), "off"],
)
def test_durations_are_humantime_milliseconds_or_timedelta(manual, value):
    guard, _ = manual
    guard.start("t", idle=value).finish()


@pytest.mark.parametrize(
    "key, value",
    [("idle", "soon"), ("deadline", -5), ("execution", True), ("grace_period", [1]), ("startup", float("nan"))],
)
def test_a_bad_duration_raises_value_error_naming_the_key_and_value(manual, key, value):
    guard, _ = manual
    with pytest.raises(ValueError) as e:
        guard.start("t", **{key: value})
    assert key in str(e.value)
    assert repr(value) in str(e.value)


@pytest.mark.parametrize("value", ["101y", "9223372036854775807s", 1e300, datetime.timedelta(days=999_999_999)])
def test_a_duration_past_100_years_is_refused_with_the_range(manual, value):
    # R8.12, R10.6: the same limit as TOML and the CLI, from the core; past
    # it, the key's own range is quoted (R8.16).
    guard, _ = manual
    with pytest.raises(ValueError, match=r"out of range, expected 1ms\.\.=365days"):
        guard.start("t", deadline=value)


def test_bad_names_are_errors_not_crashes(manual):
    guard, _ = manual
    with pytest.raises(ValueError, match="renewed_by"):
        guard.start("t", renewed_by=["output", "telepathy"])
    with pytest.raises(ValueError, match="clock"):
        sg.Guard(clock="sundial")
    with pytest.raises(TypeError):
        sg.Guard(on_event=42)
    t = guard.start("t", idle="1s")
    with pytest.raises(ValueError):
        t.tool_finished("never-started", "success")
    with pytest.raises(ValueError, match="outcome"):
        t.tool_finished("x", "meh")
    with pytest.raises(ValueError):
        guard.start("t")  # the name is taken by a live task
    with pytest.raises(RuntimeError, match="manual"):
        sg.Guard().advance(10)


def test_status_snapshots_of_one_and_all(manual):
    # R4.2: plain dicts; unknown is absent.
    guard, _ = manual
    a = guard.start("a", idle="1s")
    b = guard.start("b", idle="1s")  # noqa: F841 (dropping it would abandon it, R3.9)
    guard.advance(300)
    a.output(1000, 10)
    s = guard.status("a")
    assert s["state"] == "working"
    assert s["total_bytes"] == 1000 and s["total_lines"] == 10
    assert "last_call" not in s
    assert guard.status("nobody") is None
    assert [x["name"] for x in guard.statuses()] == ["a", "b"]
    assert guard.is_busy()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_failing_callback_costs_the_guard_nothing():
    # R6.2: the callback's exception is reported, events keep coming.
    seen = []

    def flaky(event):
        seen.append(event["type"])
        if event["type"] == "started":
            raise RuntimeError("callback bug")

    guard = sg.Guard(clock="manual", on_event=flaky)
    t = guard.start("t", idle="1s", heartbeat_interval="off")
    guard.advance(1000)
    t.finish("failed")
    guard.flush()
    assert seen == ["started", "stalled", "cancelling", "finished"]
