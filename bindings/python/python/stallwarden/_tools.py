"""Tool child processes of a guarded turn (R3.5, R5.1, R5.3, R6.9): each runs
in its own process group under a tool call of the turn's task; its output is
progress; a cancel stops the whole group through the process sink, and the
group is reaped before the call is settled."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from typing import Any, Callable, Mapping, Optional, Protocol

from ._native import _group_members

#: How long a cancelled tool's group may take to go after the process sink's
#: SIGTERM (and its SIGKILL after the grace period) before it is killed here.
REAP_BOUND_S = 30.0


class _Turn(Protocol):
    """What a tool needs of the turn it runs under (a
    :class:`~stallwarden.temporal.GuardedTurn`): its task's calls and output,
    and the cancel that Temporal's cancellation starts."""

    _tools: dict

    def tool_started(self, call_id: str, name: str, pid: Optional[int] = None) -> None: ...

    def tool_finished(self, call_id: str, outcome: str = "success") -> None: ...

    def output(self, nbytes: int, nlines: int = 0) -> None: ...

    def _cancel_from_outside(self, reason: str = ...) -> None: ...


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What a tool child process left: exit code (negative: killed by that
    signal), its pid and its whole output."""

    returncode: int
    pid: int
    stdout: bytes
    stderr: bytes


async def _pump(turn: _Turn, stream: asyncio.StreamReader, sink: bytearray,
                on_line: Optional[Callable[[bytes], object]]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            return
        sink += line
        if on_line is not None:
            on_line(line)  # first, so a heartbeat this line earns carries it
        turn.output(len(line), line.count(b"\n"))


def _group_alive(pgid: int) -> bool:
    """True while a member of the group runs; zombies (left to a parent or an
    init that reaps them later) do not count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # The engine's one reading of the process table (R10.7).
        return bool(_group_members(pgid))
    except OSError:
        return True  # no process table: trust the signal probe


async def run_tool(turn: _Turn, argv: list, name: str, call_id: str,
                   cwd: Optional[str], env: Optional[Mapping[str, str]],
                   on_line: Optional[Callable[[bytes], object]]) -> ToolResult:
    """See :meth:`GuardedTurn.run_tool`."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,  # its own process group, led by proc.pid
    )
    out, err = bytearray(), bytearray()
    try:
        turn.tool_started(call_id, name, pid=proc.pid)
    except BaseException:
        _kill_group(proc.pid)
        await proc.wait()
        raise
    pumps = asyncio.gather(_pump(turn, proc.stdout, out, on_line), _pump(turn, proc.stderr, err, None))
    try:
        await pumps
        code = await proc.wait()
    except asyncio.CancelledError:
        # Temporal's cancel (or the guard's verdict, which already cancelled
        # the task): the task's cancel makes the process sink signal the
        # group; reap it, killing it here only past a generous bound.
        turn._cancel_from_outside()
        await _reap(proc, pumps)
        _settle(turn, call_id, "cancelled")
        raise
    except BaseException:
        _kill_group(proc.pid)
        await _reap(proc, pumps)
        _settle(turn, call_id, "failure")
        raise
    # The leader exited; its group may not have (a daemon holding no pipe).
    _settle(turn, call_id, "success" if code == 0 else "failure")
    return ToolResult(returncode=code, pid=proc.pid, stdout=bytes(out), stderr=bytes(err))


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _reap(proc: Any, pumps: "asyncio.Future[Any]") -> None:
    try:
        await asyncio.wait_for(proc.wait(), REAP_BOUND_S)
    except asyncio.TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
    # The pipes close when the last holder in the group is gone.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REAP_BOUND_S
    while _group_alive(proc.pid) and loop.time() < deadline:
        await asyncio.sleep(0.05)
    if _group_alive(proc.pid):
        _kill_group(proc.pid)
    pumps.cancel()
    try:
        await pumps
    except BaseException:
        pass


def _settle(turn: _Turn, call_id: str, outcome: str) -> None:
    try:
        turn.tool_finished(call_id, outcome)
    except ValueError:
        turn._tools.pop(call_id, None)  # the task was already settled
