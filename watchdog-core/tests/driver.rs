//! The driver thread (R6.3): it wakes for a new due earlier than the one
//! it is parked for (R9.3), and dropping the last guard and handle stops it
//! and every sink thread, releasing the sinks.
//!
//! Real time: the guards run on the real clock with their own driver. Every
//! wait is bounded (`PATIENCE`, a channel's `recv_timeout`, the recording
//! sink's `wait_for`) and no duration is asserted.

use std::sync::mpsc;
use std::time::Duration;

use parking_lot::Mutex;
use watchdog_core::{Delivery, Guard, Profile, RecordingSink, Sink};

mod common;
use common::{ms, secs};

/// A bound for waits on real threads: generous, never a timing assert.
const PATIENCE: Duration = Duration::from_secs(20);

/// Tells the test when it is dropped, i.e. when the guard let go of it.
struct DropAlarm {
    tx: Mutex<mpsc::Sender<&'static str>>,
    label: &'static str,
    delivery: Delivery,
}

impl Sink for DropAlarm {
    fn delivery(&self) -> Delivery {
        self.delivery
    }
}

impl Drop for DropAlarm {
    fn drop(&mut self) {
        let _ = self.tx.lock().send(self.label);
    }
}

// R6.3: dropping the last guard and handle stops the driver thread and
// every sink thread, which releases the sinks (no leaked threads).
#[test]
fn dropping_the_guard_stops_the_driver_and_sink_threads() {
    let (tx, rx) = mpsc::channel();
    let alarm = |label, delivery| DropAlarm {
        tx: Mutex::new(tx.clone()),
        label,
        delivery,
    };
    let guard = Guard::builder()
        .sink(alarm("isolated", Delivery::Isolated))
        .sink(alarm("inline", Delivery::Inline))
        .build();
    let t = guard
        .start("d", Profile::default().idle(secs(3600)))
        .unwrap();
    t.finish_completed();
    drop(t);
    drop(guard);
    let mut dropped = vec![
        rx.recv_timeout(PATIENCE)
            .expect("a sink was never released"),
        rx.recv_timeout(PATIENCE)
            .expect("a sink was never released"),
    ];
    dropped.sort_unstable();
    assert_eq!(dropped, ["inline", "isolated"]);
}

// R6.3, R9.3: on a real clock a task whose budget ends before the one the
// driver is parked for wakes the driver: its stall is not held back until
// the earlier-armed, later timer.
#[test]
fn driver_wakes_for_a_new_earlier_due() {
    let rec = RecordingSink::new();
    let guard = Guard::builder().sink(rec.clone()).build();
    let _slow = guard
        .start(
            "slow",
            Profile::default()
                .idle(secs(3600))
                .long_running_after(ms(1))
                .heartbeat_interval(None),
        )
        .unwrap();
    // Once `long_running` is out the driver has planned its next wake for
    // the hour-long budget and parks for it.
    assert!(rec.wait_for("slow", "long_running", PATIENCE));
    let _fast = guard
        .start(
            "fast",
            Profile::default()
                .idle(ms(50))
                .terminate_after(0)
                .heartbeat_interval(None),
        )
        .unwrap();
    assert!(
        rec.wait_for("fast", "stalled", PATIENCE),
        "the driver slept through an earlier due"
    );
    assert_eq!(rec.types_for("slow"), ["started", "long_running"]);
}
