//! stallwarden: an embedded watchdog that tells a silent-but-working job from
//! a dead one.
//!
//! This facade re-exports the engine ([`watchdog_core`], also as
//! [`core`]), its [`sources`] and [`sinks`], and adds the TOML
//! [`config`] (SPEC §7) and the [`control`] socket that serves a guard's
//! task snapshots (R6.5). The `stallwarden` binary (SPEC §8) is built on it.
//!
//! # Examples
//!
//! ```
//! use stallwarden::config::Config;
//!
//! let config = Config::from_str("[defaults]\nidle = \"90s\"\n", "stallwarden.toml").unwrap();
//! let profile = config.profile(None).unwrap();
//! let guard = stallwarden::Guard::builder().clock(stallwarden::ManualClock::new()).build();
//! let task = guard.start("job", profile).unwrap();
//! task.finish_completed();
//! ```

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]
// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod config;
pub mod control;

pub use stallwarden_sinks as sinks;
pub use stallwarden_sources as sources;
pub use watchdog_core as core;
pub use watchdog_core::*;

/// Keeps the README's Rust example compiling and passing.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
