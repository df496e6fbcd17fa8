//! The vocabulary: the words every other tier speaks, and nothing that
//! runs. Time ([`clock`], [`duration`]), signals, events and snapshots, a
//! task's profile with its keys, the errors, the sink and at-stall hooks,
//! and the words of a repeat (its fingerprint and its report).
//!
//! A file here imports only other files here (plus `loom`, `sys`, std and
//! crates); `.ci/tiers` fails the build on an import of `state` or
//! `engine` (R10.7).

pub(crate) mod at_stall;
pub(crate) mod clock;
pub(crate) mod duration;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod fingerprint;
pub(crate) mod profile;
pub(crate) mod signal;
pub(crate) mod sink;
pub(crate) mod status;
pub(crate) mod value;
