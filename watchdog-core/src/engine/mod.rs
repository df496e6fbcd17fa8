//! The engine: the registry of tasks (slab, timer heap, scheduler), the
//! driver that takes verdicts when a budget can have run out, the sink
//! dispatch, the threads it starts, and the public handles: [`Guard`] with
//! its builder, [`TaskHandle`], [`Recorder`] with its single-writer
//! counter, and the repeat judge's face ([`repeat`]).
//!
//! The top tier: it may import the task's state and the vocabulary; they
//! never import it (R10.7, checked by `.ci/tiers`).
//!
//! [`Guard`]: guard::Guard
//! [`TaskHandle`]: guard::TaskHandle
//! [`Recorder`]: recorder::Recorder

pub(crate) mod dispatch;
pub(crate) mod driver;
pub(crate) mod guard;
pub(crate) mod recorder;
pub mod repeat;
pub(crate) mod scheduler;
pub(crate) mod slab;
pub(crate) mod spawn;
#[cfg(test)]
mod tests;
pub(crate) mod timers;
