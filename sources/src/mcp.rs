//! MCP progress notifications (R5.8).
