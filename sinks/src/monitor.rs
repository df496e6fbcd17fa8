//! The side-agent monitor for long-running commands (R6.6).
