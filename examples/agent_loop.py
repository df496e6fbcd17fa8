"""An agent loop guarded by stallwarden, in Python: a recorded Anthropic
stream (a real one, see sources/tests/fixtures/recorded/SOURCES.md) feeds the
guard event by event, then the tool it asked for runs under the execution
budget. A second turn loops on one call (R5.12): strike 1 is the runner's cue
to nudge the model, strike 2 the stop.
Run: pip install ./bindings/python && python3 examples/agent_loop.py"""
import asyncio, pathlib, stallwarden as sg

STREAM = pathlib.Path(__file__).parent.parent / "sources/tests/fixtures/recorded/anthropic/anthropic-tool-search-deferred-regex.chunks.txt"

async def main():
    guard = sg.Guard(on_event=lambda e: print("event:", e["type"], e.get("budget", "")))
    with guard.start("turn-1", idle="2s", execution="10m") as turn:
        stream = turn.anthropic_stream()
        for line in STREAM.read_text().splitlines():
            try:
                stream.feed(line)                      # deltas renew the idle budget (R5.2)
            except ValueError as refused:
                print("refused:", refused)
            await asyncio.sleep(0.001)                 # the network's pace
        turn.tool_started("toolu_1", "sql_probe")      # execution budget while it runs (R2.2)
        tool = asyncio.create_task(asyncio.sleep(3))   # 3 s of silence: fine for a tool
        await asyncio.wait([tool, asyncio.ensure_future(turn.cancelled())], return_when="FIRST_COMPLETED")
        turn.tool_finished("toolu_1", "success")
    guard.flush()
    print(f"{stream.accepted} deltas renewed the turn; cancelled: {turn.is_cancelled}")

    # A loud hang: the same call, the same result, again and again (R5.12).
    nudged = False
    with guard.start("turn-2", idle="2s", terminate_after=2, heartbeat_interval="off") as loop:
        for i in range(100):
            try:
                loop.tool_started(f"toolu_loop_{i}", "Read", {"file_path": "config.yaml"})
                await asyncio.sleep(0.1)                   # the tool runs
                loop.tool_finished(f"toolu_loop_{i}", "success", "port: 8080")
            except ValueError:
                break                                      # cancelled: the turn is over
            status = loop.status() or {}
            if status.get("strikes") == 1 and not nudged:  # strike 1: nudge the model
                nudged, r = True, status["repeating"]
                print(f"runner -> model: you called {r['shown']} {r['count']} times with the same result; try something else")
            if loop.is_cancelled:
                break
            await asyncio.sleep(0.3)
    guard.flush()
    print(f"turn-2 cancelled after the nudge: {loop.is_cancelled}")

asyncio.run(main())
