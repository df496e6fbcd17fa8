//! The settle stage of `run` (R10.7): once the command's status is in, a
//! bounded wait for its pipes, leaks named, leftovers stopped unless kept
//! (R8.5, R8.6, R10.2, in src/cli/aftermath.rs), the last report lines,
//! the task's outcome and the exit status (R8.2), which the restart loop
//! decides on (R8.15).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use stallwarden::Outcome;

use super::super::aftermath::Aftermath;
use super::super::logging;
use super::super::refused::EXIT_GAVE_UP;
use super::super::{EXIT_ERROR, EXIT_OUTPUT_LOST, EXIT_STOPPED};
use super::watch::Watched;
use super::{Run, FLUSH_BOUND};

/// How the run ended: the exit status and, when the command died of a
/// signal that the status stands for, that signal (R8.16).
pub(super) struct Settled {
    /// stallwarden's exit status (R8.2).
    pub(super) code: u8,
    /// The signal the command died of, when `code` stands for it.
    pub(super) died_of: Option<i32>,
}

impl Settled {
    /// A run that ended before the watch stage had a command to watch
    /// (or stopped it at once, R8.9): the status already said.
    pub(super) fn early(code: u8) -> Settled {
        Settled {
            code,
            died_of: None,
        }
    }

    /// Settles the watched command: the aftermath, the summaries, the
    /// task's `finished` event and the exit status, then the sinks flushed.
    pub(super) fn settle(run: &Run, mut watched: Watched) -> Settled {
        let Some(exit) = watched.exit.take() else {
            return Settled::gave_up(watched);
        };
        // R8.8: the command's exit ends the judging. Paused, the task takes
        // no verdict while stallwarden waits for pipes and leftovers; a
        // cancel dispatched before this point has set the flag by now.
        let _ = watched.task.pause();
        let stopped = watched.stop.stopped();
        // Ours again before stallwarden writes its last lines.
        drop(watched.terminal.take());

        // R8.5, R8.6, R10.2: a bounded wait for the pipes, leaks named,
        // then nothing the command started outlives it unless kept; a
        // signal ends the waits (R8.9).
        let drain = watched.drain;
        let mut aftermath = Aftermath {
            done: drain.done,
            pumps: drain.pumps,
            inodes: drain.inodes,
            leak_timeout: run.leak_timeout,
            on_leftover: run.on_leftover,
            pgid: watched.pid,
            grace: run.profile.grace_period,
            stopped,
            console: &watched.console,
            task: &watched.task,
            interrupted: false,
        };
        if let Some(sig) = watched.late {
            aftermath.interrupt(sig);
        }
        watched
            .runtime
            .block_on(aftermath.settle(&mut watched.incoming));
        logging::notify_summary(watched.notify.socket.as_ref());
        logging::refused_summary(watched.task.status().as_ref());
        watched.console.clear_status();

        let mut died_of = None;
        let task = watched.task;
        let console = &watched.console;
        let code = match exit {
            Ok(Ok(status)) => {
                let (mut outcome, mut code) = outcome(status, stopped);
                // R8.10: never 0 after output was lost; a command that died
                // of the SIGPIPE our closing caused failed to write, as GNU
                // tools report it: 1.
                let broke = status.signal() == Some(libc::SIGPIPE);
                if drain.lost.lost() && (code == 0 || broke) {
                    console.line("stallwarden: exiting 1: some of the command's output was lost");
                    (outcome, code) = (Outcome::Failed, EXIT_OUTPUT_LOST);
                }
                let _ = task.finish(outcome, status.code(), status.signal());
                // R8.16: the status stands for the command's death by a
                // signal (not our stop, not lost output): end with it.
                died_of = status.signal().filter(|&sig| i32::from(code) == 128 + sig);
                code
            }
            Ok(Err(e)) => {
                console.line(&format!("stallwarden: cannot wait for the command: {e}"));
                task.finish_failed();
                EXIT_ERROR
            }
            Err(_) => {
                console.line("stallwarden: lost track of the command");
                task.finish_failed();
                EXIT_ERROR
            }
        };
        drop(task);
        if !watched.guard.flush(FLUSH_BOUND) {
            console.line("stallwarden: some event sinks did not finish writing");
        }
        drop(watched.notify.place);
        Settled { code, died_of }
    }

    /// R8.16: a command stallwarden may not kill: no wait for its pipes or
    /// leftovers, which it holds as long as it likes.
    fn gave_up(mut watched: Watched) -> Settled {
        drop(watched.terminal.take());
        watched.console.clear_status();
        let _ = watched.task.finish(Outcome::Cancelled, None, None);
        drop(watched.task);
        if !watched.guard.flush(FLUSH_BOUND) {
            watched
                .console
                .line("stallwarden: some event sinks did not finish writing");
        }
        Settled::early(EXIT_GAVE_UP)
    }
}

/// Maps the command's end to the task's outcome and our exit status (R8.2).
fn outcome(status: ExitStatus, stopped_by_us: bool) -> (Outcome, u8) {
    if stopped_by_us {
        return (Outcome::Cancelled, EXIT_STOPPED);
    }
    match (status.code(), status.signal()) {
        (Some(0), _) => (Outcome::Completed, 0),
        (Some(c), _) => (Outcome::Failed, u8::try_from(c & 0xff).unwrap_or(1)),
        (None, Some(sig)) => (Outcome::Failed, u8::try_from(128 + sig).unwrap_or(255)),
        (None, None) => (Outcome::Failed, EXIT_ERROR),
    }
}
