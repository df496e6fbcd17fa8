//! The arm stage of `run` (R10.7): what is made before the command starts,
//! the guard with the CLI's sinks and its `at_stall` step, the signal
//! runtime and the signals it caught. Without any of them the command
//! never runs (R10.5, R8.16): the run exits 125.

use std::io;
use std::sync::Arc;

use stallwarden::sinks::process::ProcessSink;
use stallwarden::{Guard, Sink};
use tokio::runtime::Runtime;

use super::super::console::Console;
use super::super::hook::AtVerdict;
use super::super::pumps::OutputSeen;
use super::super::reaper::EscapedSignals;
use super::super::report::{StopFlag, VerdictLines};
use super::super::restart;
use super::super::signals::Incoming;
use super::{Run, EXIT_ERROR};

/// Descriptors the signal runtime opens: its epoll and waker, the signal
/// driver's socket pair and the driver's copy of one end.
const RUNTIME_DESCRIPTORS: usize = 5;
/// What is armed before the command starts: no watchdog thread, no
/// runtime or no caught signals, and the command never runs (R10.5,
/// R8.16).
pub(super) struct Armed {
    /// Where stallwarden's own lines go, around the status line (R8.4).
    pub(super) console: Arc<Console>,
    /// The guard, with its driver thread running.
    pub(super) guard: Guard,
    /// Whether the command wrote anything yet (R8.11's buffering hint);
    /// the pumps set it.
    pub(super) seen: OutputSeen,
    /// Set when the guard dispatched a cancel: stallwarden stopped it.
    pub(super) stop: StopFlag,
    /// The process sink, looked at for kills that were refused (R8.16).
    pub(super) procs: ProcessSink,
    /// Signals caught before the command starts, so that one arriving
    /// early is forwarded, not fatal to us alone (R8.9).
    pub(super) incoming: Incoming,
    /// The current-thread runtime the loop and the aftermath run on.
    pub(super) runtime: Runtime,
}
impl Armed {
    /// Builds the guard with the CLI's sinks and `at_stall` step, then the
    /// signal runtime with every forwarded signal caught; on failure, says
    /// why and returns 125 (the command did not start).
    pub(super) fn arm(
        run: &Run,
        restart: &restart::Watch,
        console: Arc<Console>,
        events: Option<Box<dyn Sink>>,
        at_stall: Option<AtVerdict>,
    ) -> Result<Armed, u8> {
        // R8.11: without a pty, a stall before any output hints at buffering.
        let seen = OutputSeen::default();
        let stop = StopFlag::default();
        let procs = ProcessSink::new();
        let mut builder = Guard::builder()
            .sink(stop.clone())
            .sink(procs.clone())
            .sink(EscapedSignals)
            .sink(VerdictLines {
                console: Arc::clone(&console),
                profile: run.profile.clone(),
                buffering: (!run.pty).then(|| seen.clone()),
            });
        // R8.15: why the run stopped, for the restart loop.
        builder = builder.sink(restart.sink(&run.profile));
        if let Some(at_stall) = at_stall {
            builder = builder.at_stall(at_stall);
        }
        if let Some(events) = events {
            // R8.7: a failing events file is said once, out loud.
            builder = builder.sink(super::super::loud::LoudOnFailure::new(
                events,
                Arc::clone(&console),
            ));
        }
        // R10.5: no watchdog thread, no run: the command is not started
        // unwatched.
        let guard = builder.try_build().map_err(|e| {
            eprintln!("stallwarden: cannot start the watchdog: {e}");
            EXIT_ERROR
        })?;
        let (runtime, incoming) = catch_signals()?;
        Ok(Armed {
            console,
            guard,
            seen,
            stop,
            procs,
            incoming,
            runtime,
        })
    }
}

/// The current-thread runtime with every forwarded signal caught (R8.9);
/// on failure, says why and returns 125.
fn catch_signals() -> Result<(Runtime, Incoming), u8> {
    // R8.16: tokio's signal driver panics when it cannot have its socket
    // pair (`ulimit -n 7`): the descriptors it needs are made sure of
    // first, so a low limit is a 125 with a message.
    if let Err(e) = spare_descriptors(RUNTIME_DESCRIPTORS) {
        eprintln!("stallwarden: cannot start the signal runtime: {e}");
        return Err(EXIT_ERROR);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stallwarden: cannot start the signal runtime: {e}");
            return Err(EXIT_ERROR);
        }
    };
    // R8.9: every catchable terminating signal, not only INT and TERM.
    match runtime.block_on(async { Incoming::catch() }) {
        Ok(incoming) => Ok((runtime, incoming)),
        Err(e) => {
            eprintln!("stallwarden: cannot catch signals: {e}");
            Err(EXIT_ERROR)
        }
    }
}

/// Whether `n` more descriptors can be opened now: opens them and closes
/// them again; the error (EMFILE) when they cannot.
fn spare_descriptors(n: usize) -> io::Result<()> {
    use std::os::fd::AsFd;
    let stdin = io::stdin();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(stdin.as_fd().try_clone_to_owned()?);
    }
    Ok(())
}
