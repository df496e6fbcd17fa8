//! A side-by-side comparison of stallwarden's record path and process sampler
//! with what a user would hand-roll (SPEC R9.1, R9.2, R9.4), in one process
//! and one run, printed as one table of medians and ratios.
//!
//! Run it with `cargo bench --bench compare` (a bench target without the
//! test harness, built with the bench profile). Contenders take turns
//! batch by batch (round-robin), so drift in clock speed or machine load hits
//! all of them alike; each has a warm-up batch that is not counted, and each
//! row is the median over the batches. Nothing here asserts: targets are
//! reported as met or not met, and BENCHMARKS.md explains the misses.
//!
//! Layout: `harness.rs` times contenders round-robin; `record.rs` holds the
//! record-path contenders and the hand-rolled peers; `sampling.rs` the
//! process samplers; `table.rs` prints the rows and checks the targets.

use std::time::{Duration, Instant};

use watchdog_core::Guard;

mod harness;
mod record;
mod sampling;
#[path = "../support/mod.rs"]
mod support;
mod table;

/// Batches per contender; the median is taken over these.
const BATCHES: usize = 81;
/// Batches per process sampler.
const SAMPLER_BATCHES: usize = 41;
/// Operations per batch for the nanosecond-scale contenders.
const FAST_OPS: u64 = 200_000;
/// Operations per batch for an actor that must be woken per signal.
const WAKE_OPS: u64 = 2_000;
/// The idle budget every contender renews.
const IDLE: Duration = Duration::from_secs(300);

fn main() {
    let started_at = Instant::now();
    println!("stallwarden compare: {}", table::machine());

    // --- Recording a signal (R9.1, R9.2) -----------------------------------
    let guard = Guard::builder().build(); // the real MonotonicClock
    let one = record::started(&guard, "bench-one");
    // Keep the handles alive: dropping one finishes its task.
    let task_a = record::started(&guard, "bench-a");
    let task_b = record::started(&guard, "bench-b");
    let (a, b) = (task_a.recorder(), task_b.recorder());
    let mut contenders = record::contenders(&one, &a, &b);
    harness::run_round_robin(&mut contenders, BATCHES);
    let samplers = sampling::samplers();
    table::print(&contenders, &samplers);
    println!("\ntook {:.1} s", started_at.elapsed().as_secs_f64());
    drop((one, task_a, task_b));
}
