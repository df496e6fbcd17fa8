"""stallwarden: an embedded watchdog that tells a silent-but-working agent turn
from a dead one. The engine itself (Rust), not a port (SPEC R11.1).

Everything is the native module's; `stallwarden.temporal` (import it
explicitly, it needs `temporalio`) guards Temporal activities (R6.9).
"""

from ._native import (  # noqa: F401
    ArgumentStream,
    Guard,
    Task,
    __version__,
    describe_profile,
)

# One class serves every wire format (the engine's StreamAdapter trait); the
# per-format names stay as aliases of it for code that imported them.
AnthropicStream = OpenAiStream = ResponsesStream = GeminiStream = ArgumentStream

__all__ = [
    "AnthropicStream",
    "ArgumentStream",
    "GeminiStream",
    "Guard",
    "OpenAiStream",
    "ResponsesStream",
    "Task",
    "__version__",
    "describe_profile",
]
