"""One meaning through every door (R10.6): the engine's one set of calls in
flight, with its id and name limits, and its one stream-adapter trait, seen
from Python. The same refusals, word for word, are asserted from Rust
(watchdog-core/tests/calls.rs) and Node (test/one_meaning.test.js)."""

import pytest

import stallwarden as sg
from conftest import recorded

LONG_ID = "x" * 257


def test_an_over_long_call_id_is_refused_with_the_engines_message(manual):
    guard, _ = manual
    t = guard.start("limits", idle="1s", heartbeat_interval="off")
    with pytest.raises(ValueError) as e:
        t.tool_started(LONG_ID, "bash")
    assert str(e.value) == "task `limits`: tool call id or name is 257 bytes, more than 256"
    with pytest.raises(ValueError, match="tool name is empty"):
        t.tool_started("c1", "")
    # Nothing was recorded: no call, no tool-call signal.
    status = t.status()
    assert "last_call" not in status
    assert "tool-call" not in status.get("last_signal", {})
    t.tool_started("x" * 256, "bash")  # at the limit exactly is fine
    t.finish()


def test_a_call_is_one_call_whichever_door_started_it(manual):
    # R5.3: two calls in flight hold the execution budget until both finish.
    guard, rec = manual
    t = guard.start("t", idle="1s", execution="1h", heartbeat_interval="off")
    t.tool_started("a", "bash")
    with pytest.raises(ValueError, match="already has tool call `a` in flight"):
        t.tool_started("a", "bash")
    t.tool_finished("a", "success")
    with pytest.raises(ValueError, match="has no tool call `a` in flight"):
        t.tool_finished("a", "success")
    guard.advance(1000)
    guard.flush()
    assert rec.types("t") == ["started", "stalled", "cancelling"]


def test_python_has_the_gemini_adapter_and_every_format_by_name(manual):
    # R5.9, R11.1: one class over the engine's StreamAdapter trait.
    guard, _ = manual
    t = guard.start("t", idle="1h", heartbeat_interval="off")
    s = t.gemini_stream()
    assert isinstance(s, sg.ArgumentStream) and s.format == "gemini"
    counts = {}
    for line in recorded("gemini/google-stream-tool-call-arguments.chunks.txt"):
        if line.strip():
            step = s.feed(line)
            counts[step] = counts.get(step, 0) + 1
    # The same counts the Node test asserts for this recording.
    assert counts == {"tracked": 6, "renewed": 2}
    assert s.accepted == 2
    assert "argument-delta" in t.status()["last_signal"]
    for name in ("anthropic", "openai", "responses", "gemini"):
        assert t.argument_stream(name).format == name
    with pytest.raises(ValueError, match="expected one of anthropic, openai, responses, gemini"):
        t.argument_stream("claude")
    t.finish()
