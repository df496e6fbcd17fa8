"""stallguard: an embedded watchdog that tells a silent-but-working agent turn
from a dead one. The engine itself (Rust), not a port (SPEC R11.1).

Everything is the native module's; `stallguard.temporal` (import it
explicitly, it needs `temporalio`) guards Temporal activities (R6.9).
"""

from ._native import (  # noqa: F401
    AnthropicStream,
    Guard,
    OpenAiStream,
    ResponsesStream,
    Task,
    __version__,
)

__all__ = [
    "AnthropicStream",
    "Guard",
    "OpenAiStream",
    "ResponsesStream",
    "Task",
    "__version__",
]
