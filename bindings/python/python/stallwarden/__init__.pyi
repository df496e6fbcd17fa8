"""stallwarden: an embedded watchdog that tells a silent-but-working agent turn
from a dead one. The engine itself (Rust), not a port: every rule is in
watchdog-core; see SPEC R11.1.

Durations are humantime strings ("90s", "1h 30m", "0"), "off" (or False)
where a budget can be disabled, numbers of milliseconds, or
datetime.timedelta. The engine reads every profile option in one place
(R10.6): a value means what it means in TOML, the CLI flags and Node, and a
bad one raises ValueError with the same message, naming the key and the
value (an unknown key raises TypeError). A zero heartbeat_interval is off
(R3.7); a zero grace_period kills at once and "off" is refused (R3.5); a
zero silence budget is refused (R7.2). None keeps a key's default.

`stallwarden.temporal` guards Temporal activities (R6.9); see its docstrings.
"""

import datetime
from typing import Any, Awaitable, Callable, Literal, Mapping, Optional, Sequence, TypedDict, Union

from typing_extensions import Unpack

Duration = Union[str, int, float, datetime.timedelta]
Budget = Union[Duration, Literal["off", False]]
"""A budget that can be turned off: a Duration, "off" or False."""
Step = Literal["renewed", "tracked", "ignored"]
Event = dict[str, Any]
"""An R8.3 event: always `type`, `task`, `at` (RFC 3339) and `elapsed_ms`,
then the fields of its type (`stalled`: budget, strike, silent_ms, ...)."""

__version__: str

class ProfileOptions(TypedDict, total=False):
    """The profile options `Guard.start` and `describe_profile` take: the
    keys of a TOML profile in snake_case (R10.6). None keeps a key's default."""

    idle: Optional[Budget]
    execution: Optional[Budget]
    startup: Optional[Budget]
    deadline: Optional[Budget]
    max_deadline: Optional[Budget]
    liveness: Optional[Budget]
    heartbeat_interval: Optional[Budget]
    terminate_after: Optional[int]
    grace_period: Optional[Duration]
    long_running_after: Optional[Budget]
    renewed_by: Optional[Sequence[str]]
    notify_only: Optional[bool]

class Guard:
    """A watchdog for many tasks.

    `clock="manual"` runs on a virtual clock moved only by `advance` (for
    tests); `"real"` (the default) runs its own driver thread. `on_event` is
    called with each event dict, in order, `finished` last, on the guard's
    sink thread with the GIL held. With `process_groups=True`, a cancel also
    stops the process group a task attached (`Task.attach_process`): SIGTERM,
    then SIGKILL after the grace period (R3.5).

    Raises RuntimeError, naming the thread and the system's reason, when a
    thread the guard needs (its driver, its sink thread) cannot start: no
    guard is better than one that judges nothing (R10.5).
    """

    def __init__(
        self,
        clock: Literal["real", "manual"] = "real",
        on_event: Optional[Callable[[Event], object]] = None,
        process_groups: bool = False,
    ) -> None: ...
    def start(
        self,
        name: str,
        **options: Unpack[ProfileOptions],
    ) -> Task:
        """Starts watching a task; its name must be unique among live tasks.
        Keep the returned Task: dropping it finishes the task as abandoned.

        The options are the keys of a TOML profile in snake_case, read by
        the engine's one entry (R10.6): `describe_profile(**options)` shows
        the profile they give. A bad value raises ValueError, an unknown key
        TypeError."""
    def advance(self, ms: Duration) -> None:
        """Moves the manual clock forward and takes every verdict that came due."""
    def flush(self, timeout: Duration = "5s") -> None:
        """Returns once every event emitted so far reached on_event.

        Bounded: raises TimeoutError when on_event has not caught up within
        `timeout` (default 5 s; "off" is refused), e.g. a callback that hangs.
        """
    def status(self, name: str) -> Optional[dict[str, Any]]:
        """The R4.2 status of the live task `name`, or None."""
    def statuses(self) -> list[dict[str, Any]]:
        """The R4.2 status of every live task, by start order."""
    def is_busy(self) -> bool:
        """True while any task is live (R4.3)."""

def describe_profile(**options: Unpack[ProfileOptions]) -> str:
    """The profile these options give, as Guard.start would use it, in the
    engine's canonical form (R10.6): one `key = value` line per key in TOML
    syntax, the same text as Rust's Profile::describe and Node's
    describeProfile. Raises as Guard.start does."""

class Task:
    """One watched unit of work: an agent turn, a tool call, a command."""

    @property
    def name(self) -> str: ...
    def argument_delta(self) -> None:
        """A streamed tool-argument delta (R5.2)."""
    def output(self, nbytes: int, nlines: int = 0) -> None:
        """Output of the work (R5.1)."""
    def write(self, data: Union[str, bytes]) -> None:
        """Output of the work as `stallwarden run` reads it: counted, each
        ended line judged; lines that only repeat recent ones (clocks,
        spinner frames and retry counters aside) renew nothing (R5.12)."""
    def heartbeat(self) -> None:
        """The worker is alive (R2.5); progress only if `renewed_by` says so."""
    def progress(self, value: float) -> bool:
        """A progress value; renews only when it rises (R2.6)."""
    def tool_started(self, call_id: str, name: str, input: Any = None) -> None:
        """A tool call started: the execution budget applies (R2.2, R5.3).

        With its `input` (str, bytes, or any value as JSON), a start that
        repeats a call in the task's recent window renews nothing (R5.12).

        The engine's one set of calls in flight checks it (R10.6): an empty
        id or name, one longer than 256 bytes, an id already in flight, or a
        start past 1024 calls in flight raises ValueError, with the same
        message as from Rust and Node."""
    def tool_finished(self, call_id: str, outcome: Literal["success", "failure", "error", "cancelled"], result: Any = None) -> None:
        """A tool call finished; an unknown id raises ValueError. With its
        `result` (or a digest of it), a call whose name, input and result
        repeat one in the task's recent window renews nothing, and a stall
        says `NAME returned the same result N times` (R5.12)."""
    def attach_process(self, pid: int, sample_every: Optional[Duration] = None) -> None:
        """Attaches a process group leader (a tool started in its own session):
        a guard with `process_groups=True` stops its group on a cancel, and
        its descendants, sampled every `sample_every` (default 1 s, "off":
        never), are named as `children` of stall events (R3.5, R5.5). The
        samples record `cpu` signals, and `net` ones (bytes received on the
        tree's TCP sockets) when the task's `renewed_by` lists "net" (R5.11).

        >>> p = subprocess.Popen(["sh", "-c", "sleep 30; true"], start_new_session=True)
        >>> task.attach_process(p.pid)
        """
    def pause(self) -> None:
        """Stops every budget, the deadline included (R2.8)."""
    def resume(self) -> None:
        """Resumes the budgets, keeping the time already used (R2.8)."""
    def trigger(self, reason: str) -> None:
        """Reports the task's own fault: a cancel with `reason` (R2.10)."""
    def cancel(self, reason: str) -> None:
        """Cancels the task now (R3.5)."""
    def argument_stream(self, format: StreamFormat) -> ArgumentStream:
        """An adapter for `format`'s streamed tool-call events (R5.2, R5.9);
        an unknown format raises ValueError naming the four."""
    def anthropic_stream(self) -> ArgumentStream:
        """`argument_stream("anthropic")`: Anthropic Messages events."""
    def openai_stream(self) -> ArgumentStream:
        """`argument_stream("openai")`: chat-completions chunks, with or without `index`."""
    def responses_stream(self) -> ArgumentStream:
        """`argument_stream("responses")`: OpenAI Responses API events."""
    def gemini_stream(self) -> ArgumentStream:
        """`argument_stream("gemini")`: Gemini `streamGenerateContent` chunks."""
    @property
    def is_cancelled(self) -> bool:
        """True once the guard (or the runner) cancelled the task."""
    def cancelled(self) -> Awaitable[None]:
        """Completes when the task is cancelled; call it in a running event loop."""
    def status(self) -> Optional[dict[str, Any]]:
        """The R4.2 status, or None once finished."""
    def finish(self, outcome: Literal["completed", "failed", "cancelled"] = "completed") -> None:
        """Settles the task; `finished` is its last event (R3.8)."""
    def __enter__(self) -> Task: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        """Finishes completed, or failed when an exception leaves the block."""

StreamFormat = Literal["anthropic", "openai", "responses", "gemini"]

class ArgumentStream:
    """One provider's streamed tool-call events, fed to the task (R5.2, R5.9).
    One class for every format: the engine's `StreamAdapter` trait."""

    def feed(self, data: Union[str, bytes, Mapping[str, Any]]) -> Step:
        """Feeds one stream event; raises ValueError with the reason of a refusal."""
    def turn_end(self) -> None: ...
    @property
    def format(self) -> StreamFormat: ...
    @property
    def accepted(self) -> int: ...
    @property
    def rejections(self) -> dict[str, int]: ...

# The per-format names of earlier releases: the same class.
AnthropicStream = ArgumentStream
OpenAiStream = ArgumentStream
ResponsesStream = ArgumentStream
GeminiStream = ArgumentStream
