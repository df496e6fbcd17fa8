//! Action sinks for stallwarden (SPEC §6): where events and cancel/kill
//! actions go. Each sink is one module implementing [`watchdog_core::Sink`].

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]
// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#[cfg(feature = "acp")]
pub mod acp;
pub mod callback;
pub mod channel;
pub mod hook;
pub mod jsonl;
pub mod metrics;
pub mod monitor;
pub mod process;
pub mod stacks;
mod task_ref;
pub mod token;
pub mod trace;

pub use task_ref::TaskRef;
