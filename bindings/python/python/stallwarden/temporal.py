"""Guarded Temporal activities: a fleet's failure detection made progress-true
(SPEC R6.9).

Temporal notices a wedged activity by its heartbeat timeout, but a heartbeat
sent from a timer only proves the worker process is alive. A guarded activity
heartbeats Temporal only when the stallwarden task of its attempt shows genuine
progress inside its budgets:

- progress was recorded since the last heartbeat (output, a stream delta that
  renewed the task, a tool call starting or finishing, a rising progress
  value), or
- the engine's own outbound ``heartbeat`` event (R3.7) says the task is still
  running within its budget while a tool call is in flight (a silent tool
  call under the execution budget, R2.2).

Silence outside a tool call sends nothing, so a wedged turn stops
heartbeating and Temporal's heartbeat timeout fires on whatever machine it
runs; the retry goes to another worker. At most one heartbeat is sent per
heartbeat interval (a third of the activity's heartbeat timeout by default), and
Temporal's SDK throttles further (it sends at most one per 0.8 x the
heartbeat timeout, the latest details winning), so the cost is bounded.

Each heartbeat's details are one dict with the §8.3 ``heartbeat`` fields
(``last_output_age_ms``, ``total_lines``, ``total_bytes``,
``idle_remaining_ms``, ``deadline_ms``) plus ``task``, ``attempt``,
``worker`` (the client identity), ``tools`` in flight (call id, name, pid),
``source`` (``progress`` or ``engine``) and the activity's own ``checkpoint``.
The next attempt reads them as :attr:`GuardedTurn.previous`.

A stall fails the attempt with ``ApplicationError(type="Stalled")`` (or
``DeadlineExceeded``, ``LivenessLost``, ``Triggered`` for the other
verdicts) whose single detail names the budget, the silence, the last call
and the suspects; ``non_retryable`` unless the profile says
``retry_on_stall=True``. Temporal's cancellation cancels the task, so the
process sink stops a running tool's process group.

Example (inside a worker process)::

    from temporalio import activity
    from stallwarden.temporal import GuardedTurn, Profile, guarded_activity

    @activity.defn
    @guarded_activity(profile=Profile(idle="30s", execution="10m"))
    async def agent_turn(turn: GuardedTurn, prompt: str) -> str:
        start = (turn.previous or {}).get("checkpoint") or 0
        stream = turn.anthropic_stream()
        for line in recorded_events[start:]:
            stream.feed(line)
        result = await turn.run_tool(["pytest", "-q"], name="bash")
        return result.stdout.decode()
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import functools
import inspect
import os
import threading
import time
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar, Union

from temporalio import activity
from temporalio.exceptions import ApplicationError

from . import Guard, Task
from ._temporal_util import _interval_ms, _message, _status_fields, _Stream
from ._tools import ToolResult, run_tool

__all__ = [
    "GuardedTurn",
    "Profile",
    "ToolResult",
    "VERDICT_TYPES",
    "guard",
    "guarded_activity",
    "guarded_turn",
]

Duration = Union[str, int, float, datetime.timedelta]
T = TypeVar("T")

#: The ApplicationError type of each guard verdict that cancels a task.
VERDICT_TYPES = {
    "stalled": "Stalled",
    "deadline_exceeded": "DeadlineExceeded",
    "liveness_lost": "LivenessLost",
    "triggered": "Triggered",
}

_HEARTBEAT_FIELDS = ("last_output_age_ms", "total_lines", "total_bytes", "idle_remaining_ms", "deadline_ms")


@dataclasses.dataclass(frozen=True)
class Profile:
    """The budgets of a guarded activity's task, and what a stall means.

    Budgets take what ``Guard.start`` takes (``"90s"``, ``"off"``,
    milliseconds, ``timedelta``); None keeps the engine's default.
    ``heartbeat_interval`` is both the engine's R3.7 interval and the least
    spacing of Temporal heartbeats; None means a third of the activity's
    heartbeat timeout, at least 1 s (the engine's least interval; so give
    guarded activities heartbeat timeouts of 3 s or more), or the engine's
    default (10 s) when it has none. ``retry_on_stall`` makes the
    ``Stalled`` error retryable. ``sample_every`` is how often a
    tool's process tree is sampled for suspects (None: never).

    >>> Profile(idle="30s", execution="2m").retry_on_stall
    False
    """

    idle: Optional[Duration] = None
    execution: Optional[Duration] = None
    startup: Optional[Duration] = None
    deadline: Optional[Duration] = None
    terminate_after: Optional[int] = None
    grace_period: Optional[Duration] = "2s"
    heartbeat_interval: Optional[Duration] = None
    retry_on_stall: bool = False
    sample_every: Optional[Duration] = "1s"

    @classmethod
    def of(cls, profile: Union["Profile", Mapping[str, Any], None]) -> "Profile":
        """A Profile from a Profile, a mapping of its fields, or None.

        >>> Profile.of({"idle": "5s"}).idle
        '5s'
        """
        if profile is None:
            return cls()
        if isinstance(profile, cls):
            return profile
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(profile) - known)
        if unknown:
            raise ValueError(f"profile: unknown key(s) {unknown}; expected some of {sorted(known)}")
        return cls(**profile)


class _Router:
    """The process's guard and the map from task names to live turns."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns: dict[str, GuardedTurn] = {}
        self.guard = Guard(on_event=self.dispatch, process_groups=True)

    def dispatch(self, event: dict) -> None:
        # On the guard's sink thread, GIL held, events in order.
        with self.lock:
            turn = self.turns.get(event.get("task", ""))
        if turn is not None:
            turn._engine_event(event)


_ROUTER: Optional[_Router] = None
_ROUTER_LOCK = threading.Lock()


def _router() -> _Router:
    global _ROUTER
    with _ROUTER_LOCK:
        if _ROUTER is None:
            _ROUTER = _Router()
        return _ROUTER


def guard() -> Guard:
    """The guard every guarded activity of this process runs under (one per
    process, built with ``process_groups=True``), e.g. for ``statuses()``.

    >>> guard().is_busy() in (True, False)
    True
    """
    return _router().guard


class GuardedTurn:
    """One attempt of a guarded activity: its stallwarden task, what the
    previous attempt last reported, and the recorder calls that count as
    progress (each may earn a Temporal heartbeat).

    Made by :func:`guarded_turn` / :func:`guarded_activity`; use it from the
    activity's own event loop.

    >>> async def body(turn: "GuardedTurn") -> None:
    ...     turn.output(12, 1)            # progress: may heartbeat
    ...     turn.checkpoint({"line": 3})  # carried to the next attempt
    ...     await turn.run_tool(["true"])
    """

    def __init__(self, profile: Profile) -> None:
        info = activity.info()
        self.profile = profile
        self.attempt: int = info.attempt
        self.name = f"{info.workflow_id}/{info.activity_id}#{info.attempt}"
        #: The last heartbeat details of the previous attempt, or None.
        self.previous: Optional[dict] = None
        if info.heartbeat_details:
            first = info.heartbeat_details[0]
            self.previous = first if isinstance(first, dict) else {"checkpoint": first}
        try:
            self.worker: Optional[str] = activity.client().identity
        except Exception:  # not in a worker (an ActivityEnvironment, say)
            self.worker = None
        if profile.heartbeat_interval is not None:
            every_ms = _interval_ms(profile.heartbeat_interval)
        elif info.heartbeat_timeout:
            # The engine's first "still running" comes within two intervals
            # of the last progress: a third of the timeout keeps it in time
            # (the engine's least interval is 1 s: use timeouts of 3 s up).
            every_ms = max(info.heartbeat_timeout.total_seconds() * 1000.0 / 3, 1000.0)
        else:
            every_ms = 10_000.0
        #: Least spacing of two Temporal heartbeats, in seconds.
        self.interval: float = max(every_ms, 1.0) / 1000.0
        #: Heartbeats sent by this attempt so far, by source.
        self.heartbeats: dict[str, int] = {"progress": 0, "engine": 0}
        #: The engine's R3.7 "still running" events for this attempt so far
        #: (forwarded only while a tool call is in flight).
        self.engine_heartbeats = 0
        # Until this attempt says otherwise, resume where the last one was.
        self._checkpoint: Any = (self.previous or {}).get("checkpoint")
        self._tools: dict[str, tuple[str, int]] = {}
        self._calls = 0
        self._events: list[dict] = []
        self._dirty = False
        self._last_sent = float("-inf")
        self._flush: Optional[asyncio.TimerHandle] = None
        self._loop = asyncio.get_running_loop()
        self._context = contextvars.copy_context()
        self._verdict: Optional[dict] = None
        self._outside_cancel = False
        router = _router()
        kwargs: dict[str, Any] = {"heartbeat_interval": every_ms}
        for key in ("idle", "execution", "startup", "deadline", "terminate_after", "grace_period"):
            value = getattr(profile, key)
            if value is not None:
                kwargs[key] = value
        # Routed before it starts (its `started` event finds it), and the
        # engine never waits on the router's lock.
        with router.lock:
            router.turns.setdefault(self.name, self)
        try:
            self.task: Task = router.guard.start(self.name, **kwargs)
        except BaseException:
            self._close()
            raise

    # --- recording: each is progress that may earn a heartbeat -----------

    def output(self, nbytes: int, nlines: int = 0) -> None:
        """Output of the work (R5.1): progress."""
        self.task.output(nbytes, nlines)
        self._progress()

    def argument_delta(self) -> None:
        """A streamed tool-argument delta (R5.2): progress."""
        self.task.argument_delta()
        self._progress()

    def progress(self, value: float) -> bool:
        """A progress value (R2.6): progress only when it rises."""
        rose = self.task.progress(value)
        if rose:
            self._progress()
        return rose

    def tool_started(self, call_id: str, name: str, pid: Optional[int] = None) -> None:
        """A tool call started (R5.3); with ``pid`` (a process group leader),
        a cancel stops its group through the process sink."""
        self.task.tool_started(call_id, name)
        if pid is not None:
            self.task.attach_process(pid, sample_every=self.profile.sample_every or "off")
        self._tools[call_id] = (name, pid or 0)
        self._progress()

    def tool_finished(self, call_id: str, outcome: str = "success") -> None:
        """A tool call finished: ``success``, ``failure`` or ``cancelled``."""
        self._tools.pop(call_id, None)
        self.task.tool_finished(call_id, outcome)
        self._progress()

    def checkpoint(self, value: Any) -> None:
        """Sets what the next attempt should resume from (JSON-serializable);
        it rides on every later heartbeat as ``checkpoint``. Not progress."""
        self._checkpoint = value

    def anthropic_stream(self) -> "_Stream":
        """An Anthropic Messages stream adapter whose renewing deltas count
        as progress (R5.2)."""
        return _Stream(self, self.task.anthropic_stream())

    def openai_stream(self) -> "_Stream":
        """An OpenAI chat-completions adapter (R5.2, R5.9), as above."""
        return _Stream(self, self.task.openai_stream())

    def responses_stream(self) -> "_Stream":
        """An OpenAI Responses API adapter (R5.9), as above."""
        return _Stream(self, self.task.responses_stream())

    def gemini_stream(self) -> "_Stream":
        """A Gemini ``streamGenerateContent`` adapter (R5.9), as above."""
        return _Stream(self, self.task.gemini_stream())

    async def run_tool(
        self,
        argv: Sequence[str],
        *,
        name: Optional[str] = None,
        call_id: Optional[str] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        on_line: Optional[Callable[[bytes], object]] = None,
    ) -> ToolResult:
        """Runs a tool as a child process in its own process group, under a
        tool call of the task: its output counts as progress, its pid is
        attached so a cancel (a stall, or Temporal's cancellation) stops the
        whole group. ``on_line`` sees each stdout line as it comes.

        >>> async def body(turn):
        ...     r = await turn.run_tool(["sh", "-c", "echo hi"], name="bash")
        ...     assert r.returncode == 0 and r.stdout == b"hi\\n"
        """
        self._calls += 1
        call_id = call_id or f"call-{self._calls}"
        name = name or os.path.basename(argv[0])
        return await run_tool(self, list(argv), name, call_id, cwd, env, on_line)

    # --- heartbeats ------------------------------------------------------

    def details(self, source: str = "progress", event: Optional[dict] = None) -> dict:
        """The heartbeat details now: the §8.3 ``heartbeat`` fields (from
        ``event``, or computed from the task's status) and the attempt's own.
        """
        d: dict[str, Any] = {"type": "heartbeat", "task": self.name}
        if event is not None:
            for key in ("at", "elapsed_ms") + _HEARTBEAT_FIELDS:
                if key in event:
                    d[key] = event[key]
        else:
            d.update(_status_fields(self.task.status()))
        d.update(
            source=source,
            attempt=self.attempt,
            worker=self.worker,
            pid=os.getpid(),
            tools=[{"call_id": c, "name": n, "pid": p} for c, (n, p) in self._tools.items()],
            checkpoint=self._checkpoint,
        )
        return d

    def _cancel_from_outside(self, reason: str = "activity cancelled by Temporal") -> None:
        """Temporal cancelled the attempt: cancel the task, so the process
        sink stops a running tool's group (R3.5)."""
        if self._verdict is not None or self._outside_cancel:
            return
        self._outside_cancel = True
        try:
            self.task.cancel(reason)
        except ValueError:
            pass  # already cancelling or finished

    def _alive(self) -> bool:
        return not (self.task.is_cancelled or self._verdict is not None)

    def _progress(self) -> None:
        self._dirty = True
        self._maybe_send("progress", None)

    def _maybe_send(self, source: str, event: Optional[dict]) -> None:
        if not self._alive():
            return  # nothing "still running" after a cancel (R3.8)
        wait = self._last_sent + self.interval - time.monotonic()
        if wait <= 0:
            self._send(source, event)
        elif self._flush is None and source == "progress":
            # The earned heartbeat goes out when the interval allows it.
            self._flush = self._loop.call_later(wait, self._flush_progress, context=self._context)

    def _flush_progress(self) -> None:
        self._flush = None
        if self._dirty:
            self._maybe_send("progress", None)

    def _send(self, source: str, event: Optional[dict]) -> None:
        self._dirty = False
        self._last_sent = time.monotonic()
        self.heartbeats[source] += 1
        activity.heartbeat(self.details(source, event))

    def _engine_event(self, event: dict) -> None:
        # On the guard's sink thread.
        kind = event.get("type")
        if kind != "heartbeat":
            self._events.append(event)  # few: started, verdicts, cancelling
        if kind in VERDICT_TYPES:
            self._verdict = event
        if kind == "heartbeat":
            self.engine_heartbeats += 1
            try:
                self._loop.call_soon_threadsafe(self._engine_heartbeat, event, context=self._context)
            except RuntimeError:
                pass  # the attempt's loop closed: nobody to heartbeat for

    def _engine_heartbeat(self, event: dict) -> None:
        # Still running within budget (R3.7): genuine only while a tool call
        # is in flight under the execution budget; idle silence earns nothing.
        if self._tools:
            self._maybe_send("engine", event)

    # --- settling --------------------------------------------------------

    def verdict_error(self) -> Optional[ApplicationError]:
        """The typed error for the guard's verdict, once there is one."""
        v = self._verdict
        if v is None:
            return None
        kind = VERDICT_TYPES[v["type"]]
        status = self.task.status() or {}
        last_call = status.get("last_call")
        children = v.get("children") or []
        suspects = [c for c in children if c.get("state") == "disk_wait" or c.get("cpu_delta_ms") == 0]
        limit = None
        for b in status.get("budgets") or []:
            if b.get("budget") == v.get("budget"):
                limit = b.get("limit_ms")
        detail = {
            "verdict": v["type"],
            "budget": v.get("budget"),
            "budget_ms": limit,
            "silent_ms": v.get("silent_ms"),
            "strike": v.get("strike"),
            "terminate_after": v.get("terminate_after"),
            "reason": v.get("reason"),
            "last_call": last_call,
            "last_step": status.get("last_step"),
            "suspects": suspects,
            "children": v.get("children"),
            "task": self.name,
            "attempt": self.attempt,
            "worker": self.worker,
            "checkpoint": self._checkpoint,
        }
        return ApplicationError(
            _message(detail),
            detail,
            type=kind,
            non_retryable=not self.profile.retry_on_stall,
        )

    def _close(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        router = _router()
        with router.lock:
            if router.turns.get(self.name) is self:
                del router.turns[self.name]


class guarded_turn:
    """An async context manager that guards the activity attempt it runs in.

    It starts the attempt's task (named ``workflow_id/activity_id#attempt``),
    yields its :class:`GuardedTurn`, and settles it on the way out: a guard
    verdict (a stall, say) cancels the body and leaves as the typed
    ``ApplicationError``; Temporal's cancellation cancels the task (the tool's
    process group is stopped) and propagates; an error finishes the task
    failed; a normal exit finishes it completed.

    >>> @activity.defn
    ... async def turn_activity(prompt: str) -> int:
    ...     async with guarded_turn(Profile(idle="30s")) as turn:
    ...         r = await turn.run_tool(["sh", "-c", "make test"], name="bash")
    ...         return r.returncode
    """

    def __init__(self, profile: Union[Profile, Mapping[str, Any], None] = None) -> None:
        self._profile = Profile.of(profile)
        self.turn: Optional[GuardedTurn] = None
        self._body: Optional[asyncio.Task] = None
        self._watch: Optional[asyncio.Task] = None
        self._interrupted = False

    async def __aenter__(self) -> GuardedTurn:
        self.turn = GuardedTurn(self._profile)
        self._body = asyncio.current_task()
        self._watch = asyncio.get_running_loop().create_task(self._watch_verdict())
        return self.turn

    async def _watch_verdict(self) -> None:
        turn = self.turn
        assert turn is not None
        await turn.task.cancelled()
        # The cancel action and its verdict event travel separately (the
        # events on the guard's sink thread): wait, bounded, for the event.
        for _ in range(500):
            if turn._verdict is not None or any(e.get("type") == "cancelling" for e in turn._events):
                break
            await asyncio.sleep(0.01)
        if turn._verdict is not None and not turn._outside_cancel and self._body is not None:
            self._interrupted = True
            self._body.cancel()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        turn = self.turn
        assert turn is not None and self._watch is not None
        self._watch.cancel()
        try:
            if self._interrupted:
                if self._body is not None and hasattr(self._body, "uncancel"):
                    self._body.uncancel()
                error = turn.verdict_error()
                _finish(turn.task, "cancelled")
                raise error from None  # type: ignore[misc]
            if exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
                turn._cancel_from_outside()
                _finish(turn.task, "cancelled")
                return False
            if exc_type is not None:
                error = turn.verdict_error()
                _finish(turn.task, "failed")
                if error is not None:
                    raise error from exc
                return False
            _finish(turn.task, "completed")
            return False
        finally:
            turn._close()


def _finish(task: Task, outcome: str) -> None:
    try:
        task.finish(outcome)
    except ValueError:
        pass  # already finished


def guarded_activity(
    fn: Optional[Callable[..., Awaitable[T]]] = None,
    *,
    profile: Union[Profile, Mapping[str, Any], None] = None,
) -> Any:
    """Wraps an async activity function so each attempt runs guarded.

    The function gets the attempt's :class:`GuardedTurn` as its first
    argument; Temporal sees the function without it (same name, same
    argument types). Put ``@activity.defn`` above it.

    >>> @activity.defn
    ... @guarded_activity(profile={"idle": "30s", "execution": "5m"})
    ... async def run_tests(turn: GuardedTurn, path: str) -> int:
    ...     return (await turn.run_tool(["pytest", "-q", path])).returncode
    """

    def wrap(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        if not asyncio.iscoroutinefunction(fn):
            raise TypeError(f"guarded_activity: {fn.__qualname__} must be an async function")

        @functools.wraps(fn)
        async def activity_fn(*args: Any, **kwargs: Any) -> T:
            async with guarded_turn(profile) as turn:
                return await fn(turn, *args, **kwargs)

        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if not params:
            raise TypeError(f"guarded_activity: {fn.__qualname__} must take the turn as its first argument")
        activity_fn.__signature__ = sig.replace(parameters=params[1:])  # type: ignore[attr-defined]
        return activity_fn

    if fn is not None:
        return wrap(fn)
    return wrap
