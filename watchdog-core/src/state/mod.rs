//! A task's state: its atomic cell (what the record path writes), and its
//! slow half under the scheduler lock (its phase and budgets, its calls in
//! flight, its outbox, its verdicts, snapshots and probes, its window of
//! repeats).
//!
//! A file here imports only this tier and the vocabulary (plus `loom`,
//! `sys`, std and crates), never the engine; `.ci/tiers` fails the build on
//! an import of `engine` (R10.7).

pub(crate) mod calls;
pub(crate) mod cell;
pub(crate) mod outbox;
pub(crate) mod probe;
#[cfg(test)]
pub(crate) mod race;
pub(crate) mod task;
pub(crate) mod window;
