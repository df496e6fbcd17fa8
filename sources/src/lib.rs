//! Liveness sources for stallwarden (SPEC §5): adapters that turn what a
//! runner sees (bytes, stream events, datagrams, process tables, files) into
//! signals on a task's [`watchdog_core::Recorder`]. Each source is one module
//! of the same shape and uses the core's public API only; what a source
//! refuses is counted on the task under one key scheme ([`refusal`], R10.6).

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]
// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
pub mod agent;
pub mod args;
pub mod background;
pub mod file;
pub mod mcp;
pub mod notify;
pub mod output;
pub mod procs;
pub mod refusal;
pub mod tools;

pub use refusal::{Refusal, Step};
