//! Action sinks for stallwarden (SPEC §6): where events and cancel/kill
//! actions go. Each sink is one module implementing [`watchdog_core::Sink`].

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]
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
