//! The monitor sink's poller thread (R6.6, R8.6): building the sink starts
//! one, and dropping the sink stops it, so nothing is left running. A test
//! binary of its own, because the test counts this process's monitor threads
//! and no other test beside it may start any. Real time, bounded: a new
//! thread takes its name itself once it runs, so each count is waited for,
//! yielding, for at most 30 s; no duration is asserted.

use std::time::Duration;

use stallwarden_sinks::monitor::MonitorSink;
use watchdog_core::Sink;

/// Threads of this process whose name starts `stallwarden-mon` (a name is
/// cut to 15 bytes): monitor pollers and workers. No other test in this
/// binary starts any.
fn monitor_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("stallwarden-mon"))
        .count()
}

// R6.6, R8.6: the monitor sink names itself, and dropping it stops its
// poller thread (nothing left running); the poller is asleep with no
// monitor open, so only the drop can wake it. A new thread takes its name
// itself once it runs, so both counts are waited for, within a bound.
#[test]
fn a_dropped_monitor_sink_leaves_no_poller_behind() {
    let settles_at = |n: usize| {
        let bound = std::time::Instant::now() + Duration::from_secs(30);
        while monitor_threads() != n && std::time::Instant::now() < bound {
            std::thread::yield_now();
        }
        monitor_threads()
    };
    assert_eq!(monitor_threads(), 0);
    let sink = MonitorSink::rule_based().build().unwrap();
    assert_eq!(sink.name(), "monitor");
    assert_eq!(settles_at(1), 1, "the poller");
    drop(sink);
    assert_eq!(settles_at(0), 0, "the poller is still running");
}
