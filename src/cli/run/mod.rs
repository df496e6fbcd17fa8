//! `stallwarden run [OPTIONS] -- CMD [ARGS...]` (R8.1–R8.4): one task around
//! one command in its own process group.
//!
//! Threads: two blocking pumps copy the command's stdout and stderr to ours
//! through counting readers (each read is an `output` signal, R8.10 in
//! src/cli/pumps.rs); one thread waits for the command; the main thread
//! runs a small current-thread tokio runtime for signal forwarding (R8.9,
//! src/cli/signals.rs), the status line and the aftermath. Verdicts come
//! from the guard's own driver thread (R6.3), never from this runtime.
//!
//! Fail closed (R8.9): if a pump or the waiter cannot be had once the
//! command runs, its group is killed, the reason said, and the run exits
//! 124 (stallwarden stopped it), never 125 ("did not start").
//!
//! The run is stages, each a struct that owns what it made and hands it to
//! the next by value, the checked options (`Run`) borrowed by all (R10.7):
//!
//! - `arm::Armed`, made before the command starts: the guard and its
//!   sinks, the signal runtime and the signals it caught;
//! - `spawn::Spawned`: the command started (exec, outputs, pty), its task,
//!   the pumps copying its output and the thread waiting for it;
//! - `watch::Watched`: the loop until the command exits or a refused kill
//!   ends the wait (sampler, input wait, signals, control socket, status
//!   line), and what it leaves for the last stage;
//! - `settle::Settled`: the aftermath (pipes, leaks, leftovers), the last
//!   report and the exit status, which the restart loop decides on.

mod arm;
mod settle;
mod spawn;
mod watch;

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use stallwarden::config::OnLeftover;
use stallwarden::sinks::jsonl::JsonLinesSink;
use stallwarden::{Profile, Sink};

use super::args::RunArgs;
use super::console::Console;
use super::{check, signals, EXIT_ERROR};
use arm::Armed;
use settle::Settled;
use spawn::Spawned;
use watch::Watched;

/// How long isolated sinks (the events file) get to catch up before exit.
const FLUSH_BOUND: Duration = Duration::from_secs(5);

/// Runs `run`; returns the process exit status (R8.2). With `restart =
/// "on-stall"`, again after each stall that stopped it (R8.15,
/// src/cli/restart.rs).
pub(crate) fn run(args: RunArgs) -> u8 {
    // R8.16: before any write of ours (the events file is opened below).
    signals::ignore_file_size_signal();
    super::restart::supervise(args, attempt)
}

/// One run of the command; returns its exit status (R8.2).
fn attempt(args: RunArgs, attempt: super::restart::Attempt) -> u8 {
    match Run::prepare(args) {
        Ok(run) => {
            let Settled { code, died_of } = run.execute(attempt);
            // R8.16: a command that died of a signal ends stallwarden with
            // it, once everything is written and cleaned up, as GNU
            // `timeout` does; 128+N only if that signal cannot end us. Such
            // a run is never one a restart follows (only a stall is).
            if let Some(sig) = died_of {
                signals::die_of(sig);
            }
            code
        }
        Err(message) => {
            eprintln!("stallwarden: {message}");
            EXIT_ERROR
        }
    }
}

/// Everything checked before the command starts: a mistake here exits 125
/// and the command never runs (R8.2).
struct Run {
    profile: Profile,
    command: Vec<OsString>,
    events: Option<Box<dyn Sink>>,
    socket: Option<PathBuf>,
    status_line: bool,
    /// R5.10: read stdout as this agent CLI's JSON lines too.
    stream: Option<stallwarden::sources::agent::Format>,
    leak_timeout: Duration,
    on_leftover: OnLeftover,
    /// R8.13: pause the budgets while the command waits for input.
    on_input_wait: stallwarden::config::OnInputWait,
    /// R8.11: the command's outputs are pseudo-terminals.
    pty: bool,
    /// R8.11: our stdout and stderr are one open file.
    shared: bool,
    /// R8.14: what runs at a stall before the stop (src/cli/hook.rs),
    /// when there is anything to run; taken by the guard.
    at_verdict: Option<super::hook::AtVerdict>,
}

impl Run {
    fn prepare(args: RunArgs) -> Result<Run, String> {
        let config = check::load(args.config.as_deref()).map_err(|e| e.to_string())?;
        let mut profile = config
            .profile(args.profile.as_deref())
            .map_err(|e| e.to_string())?;
        let stream = super::stream::choose(
            args.stream,
            config
                .stream(args.profile.as_deref())
                .map_err(|e| e.to_string())?,
        );
        let options = config
            .run_options(args.profile.as_deref())
            .map_err(|e| e.to_string())?;
        // Flags override the config (R8.1); R5.10: an agent stream's tools
        // get 30m unless an execution budget is set anywhere.
        super::inputs::apply_flags(&args, &mut profile);
        super::inputs::stream_default(&mut profile, stream.is_some(), args.execution.is_some());
        profile.validate().map_err(|e| {
            let flag = super::inputs::flag_of(&e.key);
            format!("{flag} is {}, expected {}", e.found, e.expected)
        })?;
        if let Some(path) = &args.socket {
            super::inputs::check_socket(path)?;
        }
        let events: Option<Box<dyn Sink>> = match args.events.as_deref() {
            None => None,
            Some("-") => Some(Box::new(JsonLinesSink::stderr())),
            Some(path) => Some(super::inputs::open_events(path)?),
        };
        // R8.4: a live line only on a terminal, and not when JSON lines share
        // stderr with it.
        let status_line =
            io::IsTerminal::is_terminal(&io::stderr()) && args.events.as_deref() != Some("-");
        let at_verdict = super::hook::AtVerdict::new(
            args.on_stall.map_or(options.on_stall, |c| {
                Some(c).filter(|c| !c.trim().is_empty())
            }),
            args.on_stall_timeout.unwrap_or(options.on_stall_timeout),
            options.stacks && !args.no_stacks,
            &profile,
        );
        Ok(Run {
            profile,
            command: args.command,
            events,
            socket: args.socket,
            status_line,
            stream,
            leak_timeout: args.leak_timeout.unwrap_or(options.leak_timeout),
            on_leftover: args
                .on_leftover
                .map_or(options.on_leftover, OnLeftover::from),
            on_input_wait: args.on_input_wait.map_or(options.on_input_wait, Into::into),
            // R8.16: `--no-pty` overrides a config's `pty = true`.
            pty: args.pty || (options.pty && !args.no_pty),
            shared: super::outputs::same_open_file(libc::STDOUT_FILENO, libc::STDERR_FILENO),
            at_verdict: Some(at_verdict).filter(super::hook::AtVerdict::is_active),
        })
    }

    /// Runs the command through the stages; returns its exit status and,
    /// when the command died of a signal that the status stands for, that
    /// signal.
    fn execute(mut self, attempt: super::restart::Attempt) -> Settled {
        let console = Arc::new(Console::new(self.status_line, self.shared));
        let (events, at_verdict) = (self.events.take(), self.at_verdict.take());
        let armed = match Armed::arm(&self, &attempt.watch, console, events, at_verdict) {
            Ok(armed) => armed,
            Err(code) => return Settled::early(code),
        };
        let spawned = match Spawned::start(&self, &armed, attempt.restarted) {
            Ok(spawned) => spawned,
            Err(code) => return Settled::early(code),
        };
        let watched = Watched::watch(armed, &self, &attempt.watch, spawned);
        Settled::settle(&self, watched)
    }
}
