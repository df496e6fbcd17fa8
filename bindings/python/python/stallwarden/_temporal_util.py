"""Private helpers of `stallwarden.temporal`: durations, the §8.3 heartbeat
fields of a status snapshot, the verdict message, the stream wrapper."""

from __future__ import annotations

from typing import Any, Optional


def _ms(d: Any) -> Optional[float]:
    if d is None:
        return None
    if hasattr(d, "total_seconds"):
        return d.total_seconds() * 1000.0
    return float(d)


class _Stream:
    """A stream adapter whose renewing feeds count as turn progress."""

    def __init__(self, turn: Any, inner: Any) -> None:
        self._turn = turn
        self._inner = inner

    def feed(self, data: Any) -> str:
        """Feeds one event; returns the adapter's step (see ``stallwarden``)."""
        step = self._inner.feed(data)
        if step == "renewed":
            self._turn._progress()
        return step

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _interval_ms(d: Any) -> float:
    """Milliseconds of a Profile's heartbeat interval."""
    if isinstance(d, str):
        return _parse_simple(d)
    ms = _ms(d)
    if ms is None or ms != ms or ms < 0:
        raise ValueError(f"heartbeat_interval: expected a duration, got {d!r}")
    return ms


def _parse_simple(s: str) -> float:
    units = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}
    total, num = 0.0, ""
    i = 0
    s = s.replace(" ", "")
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = "ms" if s.startswith("ms", i) else c
        if unit not in units or not num:
            raise ValueError(f"heartbeat_interval: cannot read {s!r} (expected e.g. \"1s\", \"500ms\")")
        total += float(num) * units[unit]
        num = ""
        i += len(unit)
    if num:
        raise ValueError(f"heartbeat_interval: {s!r} has a number without a unit")
    return total


def _status_fields(status: Optional[dict]) -> dict:
    if not status:
        return {}
    out: dict[str, Any] = {
        "elapsed_ms": status.get("elapsed_ms"),
        "total_lines": status.get("total_lines"),
        "total_bytes": status.get("total_bytes"),
    }
    if status.get("last_output_age_ms") is not None:
        out["last_output_age_ms"] = status["last_output_age_ms"]
    for b in status.get("budgets") or []:
        if b.get("budget") == "idle":
            out["idle_remaining_ms"] = b.get("remaining_ms")
        if b.get("budget") == "deadline":
            out["deadline_ms"] = b.get("limit_ms")
    return out


def _message(d: dict) -> str:
    what = d["verdict"].replace("_", " ")
    parts = [what]
    if d.get("budget"):
        parts.append(f"{d['budget']} budget" + (f" {d['budget_ms'] / 1000:g}s" if d.get("budget_ms") else ""))
    if d.get("silent_ms") is not None:
        parts.append(f"silent {d['silent_ms'] / 1000:.1f}s")
    if d.get("reason"):
        parts.append(str(d["reason"]))
    call = d.get("last_call")
    if call:
        parts.append(f"last call {call.get('name')} ({call.get('id')})")
    if d["suspects"]:
        parts.append("suspects: " + ", ".join(f"{s.get('name')} (pid {s.get('pid')})" for s in d["suspects"]))
    return "; ".join(parts)

