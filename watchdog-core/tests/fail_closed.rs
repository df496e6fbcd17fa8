//! Failures to get a thread fail closed (R10.5): an error to the caller,
//! never a guard that judges nothing nor a sink queue that grows forever.
//! The failures are injected with the builder's `spawn_gate`, which stands
//! in for `std::thread::Builder::spawn`'s own error.

use std::io;
use std::sync::mpsc;
use std::time::Duration;

use watchdog_core::{Delivery, Event, Guard, GuardError, ManualClock, Sink, SinkError};

fn no_threads(name: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("injected: no thread for {name}"),
    ))
}

fn no_driver(name: &str) -> io::Result<()> {
    if name == "stallwarden-driver" {
        return no_threads(name);
    }
    Ok(())
}

fn no_second_sink(name: &str) -> io::Result<()> {
    if name == "stallwarden-sink-second" {
        return no_threads(name);
    }
    Ok(())
}

/// An isolated sink that says when its thread let go of it.
struct Isolated {
    name: &'static str,
    _alive: mpsc::Sender<()>,
}

impl Sink for Isolated {
    fn on_event(&self, _: &Event) -> Result<(), SinkError> {
        Ok(())
    }
    fn delivery(&self) -> Delivery {
        Delivery::Isolated
    }
    fn name(&self) -> &str {
        self.name
    }
}

#[test]
fn try_build_is_an_error_when_the_driver_thread_cannot_start() {
    let err = Guard::builder()
        .spawn_gate(no_driver)
        .try_build()
        .expect_err("a guard without its driver would never take a verdict");
    assert_eq!(
        err,
        GuardError::Thread {
            thread: "stallwarden-driver".into(),
            reason: "injected: no thread for stallwarden-driver".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "could not start thread `stallwarden-driver`: injected: no thread for stallwarden-driver"
    );
}

#[test]
#[should_panic(expected = "stallwarden: could not start thread `stallwarden-driver`: injected")]
fn build_panics_naming_the_thread_it_could_not_start() {
    let _ = Guard::builder().spawn_gate(no_driver).build();
}

#[test]
fn a_virtual_guard_needs_no_driver_thread() {
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .spawn_gate(no_driver)
        .try_build();
    assert!(guard.is_ok());
}

#[test]
fn an_isolated_sink_whose_thread_cannot_start_is_refused_and_the_others_stop() {
    let (alive, gone) = mpsc::channel();
    let err = Guard::builder()
        .clock(ManualClock::new())
        .sink(Isolated {
            name: "first",
            _alive: alive.clone(),
        })
        .sink(Isolated {
            name: "second",
            _alive: alive,
        })
        .spawn_gate(no_second_sink)
        .try_build()
        .expect_err("a sink without its thread would queue events forever");
    assert!(
        matches!(&err, GuardError::Thread { thread, .. } if thread == "stallwarden-sink-second"),
        "{err}"
    );
    // The first sink's thread had started: it ends, and lets go of its
    // sink, once the half-built guard is gone. Bounded: 60 s.
    assert_eq!(
        gone.recv_timeout(Duration::from_secs(60)),
        Err(mpsc::RecvTimeoutError::Disconnected),
        "the first sink's thread is still running"
    );
}

#[test]
fn a_real_guard_with_its_threads_builds() {
    let guard = Guard::builder()
        .sink(Isolated {
            name: "only",
            _alive: mpsc::channel().0,
        })
        .spawn_gate(|_| Ok(()))
        .try_build()
        .unwrap();
    assert!(guard.flush(Duration::from_secs(30)));
}
