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

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stallwarden::config::OnLeftover;
use stallwarden::control::ControlServer;
use stallwarden::sinks::jsonl::JsonLinesSink;
use stallwarden::sinks::process::{GroupSignal, ProcessSink};
use stallwarden::sources::notify::NotifySocket;
use stallwarden::sources::procs::ProcessSampler;
use stallwarden::{Guard, Outcome, Profile, SignalKind, Sink, TaskHandle};

use super::aftermath::Aftermath;
use super::args::RunArgs;
use super::console::{Console, Stream};
use super::outputs::Outputs;
use super::pumps::{OutputLost, OutputSeen, PendingOutput, Pump, PumpWatch};
use super::reaper::{self, EscapedSignals, OrphanReaper, WithEscaped};
use super::refused::{Refusals, EXIT_GAVE_UP};
use super::report::{status_line, Pauses, StopFlag, VerdictLines};
use super::signals::{self, Incoming};
use super::stream::Tap;
use super::terminal::Terminal;
use super::{check, EXIT_ERROR, EXIT_OUTPUT_LOST, EXIT_STOPPED};

/// How long isolated sinks (the events file) get to catch up before exit.
const FLUSH_BOUND: Duration = Duration::from_secs(5);
/// How often the live status line is redrawn, and how long the command
/// must have been silent for it to be (R8.4).
const STATUS_EVERY: Duration = Duration::from_secs(1);

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
            let (code, died_of) = run.execute(attempt);
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
    /// R8.14: what runs at a stall before the stop (src/cli/hook.rs).
    at_verdict: super::hook::AtVerdict,
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
            at_verdict,
        })
    }

    /// Runs the command; returns the exit status and, when the command
    /// died of a signal that the status stands for, that signal.
    fn execute(self, attempt: super::restart::Attempt) -> (u8, Option<i32>) {
        let console = Arc::new(Console::new(self.status_line, self.shared));
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
                profile: self.profile.clone(),
                buffering: (!self.pty).then(|| seen.clone()),
            });
        // R8.15: why the run stopped, for the restart loop.
        builder = builder.sink(attempt.watch.sink(&self.profile));
        if self.at_verdict.is_active() {
            builder = builder.at_stall(self.at_verdict);
        }
        if let Some(events) = self.events {
            // R8.7: a failing events file is said once, out loud.
            builder = builder.sink(super::loud::LoudOnFailure::new(
                events,
                Arc::clone(&console),
            ));
        }
        // R10.5: no watchdog thread, no run: the command is not started
        // unwatched.
        let guard = match builder.try_build() {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("stallwarden: cannot start the watchdog: {e}");
                return (EXIT_ERROR, None);
            }
        };

        // R8.16: tokio's signal driver panics when it cannot have its
        // socket pair (`ulimit -n 7`): the descriptors it needs are made
        // sure of first, so a low limit is a 125 with a message.
        if let Err(e) = spare_descriptors(RUNTIME_DESCRIPTORS) {
            eprintln!("stallwarden: cannot start the signal runtime: {e}");
            return (EXIT_ERROR, None);
        }
        // Signals are caught before the command starts, so a SIGTERM that
        // arrives early is forwarded, not fatal to us alone.
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("stallwarden: cannot start the signal runtime: {e}");
                return (EXIT_ERROR, None);
            }
        };
        // R8.9: every catchable terminating signal, not only INT and TERM.
        let mut incoming = match runtime.block_on(async { Incoming::catch() }) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("stallwarden: cannot catch signals: {e}");
                return (EXIT_ERROR, None);
            }
        };

        // R8.6: orphans of the command's tree come to us, not to init.
        if let Err(e) = reaper::become_subreaper() {
            tracing::warn!(error = %e, "not a child subreaper: escaped processes go to init");
        }
        let notify = NotifyPlace::create()
            .map_err(|e| console.line(&format!("stallwarden: no NOTIFY_SOCKET: {e}")))
            .ok();
        let program = &self.command[0];
        let mut command = Command::new(program);
        command
            .args(&self.command[1..])
            .process_group(0)
            .stdin(Stdio::inherit())
            .env_remove(super::FAIL_VAR);
        // R8.11: two pipes, one shared pipe, or ptys (src/cli/outputs.rs).
        let mut outputs = match Outputs::prepare(self.pty, self.shared)
            .and_then(|o| o.wire(&mut command).map(|()| o))
        {
            Ok(o) => o,
            Err(e) => {
                let what = if self.pty {
                    "a pseudo-terminal"
                } else {
                    "a pipe"
                };
                eprintln!("stallwarden: cannot open {what} for the command's output: {e}");
                return (EXIT_ERROR, None);
            }
        };
        // R8.1: an interactive command gets the terminal (src/cli/terminal.rs).
        let terminal = Terminal::prepare(&mut command);
        // Bound before the spawn so nothing the command sends in its first
        // instants is lost; served once the task (which needs the pid for
        // its `started` event, R8.3) exists.
        let pending_notify = notify.as_ref().and_then(|place| {
            NotifySocket::prepare(&place.path)
                .map_err(|e| console.line(&format!("stallwarden: no NOTIFY_SOCKET: {e}")))
                .ok()
        });
        if let Some(pending) = &pending_notify {
            command.env("NOTIFY_SOCKET", pending.path());
        } else if std::env::var_os("NOTIFY_SOCKET").is_some() {
            // Never our parent's socket: the command's datagrams would
            // reach a manager that is not watching it, unseen by us.
            command.env_remove("NOTIFY_SOCKET");
            console.line(
                "stallwarden: the command runs without NOTIFY_SOCKET (the inherited one is removed)",
            );
        }
        // R8.12: as execvp, a file without `#!` runs through /bin/sh.
        let spawned = super::exec::spawn(&mut command, program, terminal.as_ref(), &outputs);
        // The child's ends of its outputs are held by `command` and
        // `outputs`: ours must close, or the pumps never see the end (R8.5).
        drop(command);
        outputs.spawned();
        let mut child = match spawned {
            Ok(c) => c,
            Err((line, code)) => {
                eprintln!("{line}");
                return (code, None);
            }
        };
        let pid = child.id();
        if let Some(t) = &terminal {
            t.hand_to(pid);
        }
        let name = task_name(program);
        let task = match guard.start_process(name.clone(), self.profile.clone(), pid) {
            Ok(t) => t,
            Err(e) => {
                // Unreachable with a validated profile; never leave the
                // command running unwatched.
                eprintln!("stallwarden: cannot watch the command: {e}");
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
                return (EXIT_ERROR, None);
            }
        };

        if let Some(r) = attempt.restarted {
            let _ = task.restarted(r.count, r.delay, r.last_stall);
        }
        let _notify_socket = pending_notify.and_then(|pending| {
            pending
                .attach(task.recorder())
                .map_err(|e| console.line(&format!("stallwarden: no NOTIFY_SOCKET: {e}")))
                .ok()
        });
        // R5.5: sample the descendants so stall lines name suspects. The
        // interval is half the shortest silence budget, within 1 s..=15 s
        // (15 s is R5.5's default): with a 3 s budget, two samples (and so
        // a CPU delta) exist by the time the stall is judged. A quarter
        // with `net` in renewed-by (see `sample_interval`).
        let _sampler =
            ProcessSampler::spawn(pid, sample_interval(&self.profile), Some(task.recorder()))
                .map_err(|e| console.line(&format!("stallwarden: no process sampling: {e}")))
                .ok();
        // R8.6: escaped descendants are named among the suspects too.
        let _escaped = _sampler
            .as_ref()
            .and_then(|s| WithEscaped::attach(pid, s.probe(), s.interval(), &task.recorder()));
        let _control = self.socket.as_ref().and_then(|path| {
            ControlServer::bind(path, guard.clone())
                .map_err(|e| console.line(&format!("stallwarden: no control socket: {e}")))
                .ok()
        });

        let _reaper = OrphanReaper::spawn(pid, Duration::from_millis(500));
        let (done_tx, done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let lost = OutputLost::default();
        let readers = match outputs.readers(&mut child) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("cannot read the command's output: {e}");
                return (
                    fail_closed(&mut child, &task, &guard, &console, terminal, &why),
                    None,
                );
            }
        };
        let inodes: std::collections::HashSet<u64> = readers.keys.iter().copied().collect();
        // R8.16: output on its way through the pumps counts at a verdict;
        // looked at from before the first byte is read.
        let watches: Vec<_> = readers
            .files
            .iter()
            .map(|_| Arc::new(PumpWatch::default()))
            .collect();
        task.recorder().set_verdict_look(Arc::new(PendingOutput {
            recorder: task.recorder(),
            pumps: watches.clone(),
        }));
        let mut pumps = 0;
        for ((from, to), watch) in readers.files.into_iter().zip(watches) {
            pumps += 1;
            // R5.10: the agent's JSON lines are on its stdout.
            let tap = (to == Stream::Stdout)
                .then_some(self.stream)
                .flatten()
                .map(|f| Tap::new(f, task.recorder()));
            let pump = Pump {
                recorder: task.recorder(),
                console: Arc::clone(&console),
                to,
                done: done_tx.clone(),
                tap,
                lost: lost.clone(),
                seen: seen.clone(),
                watch,
            };
            if let Err(e) = pump.spawn(from) {
                let to = match to {
                    Stream::Stdout => "stdout",
                    Stream::Stderr => "stderr",
                };
                let why = format!("cannot copy the command's {to}: {e}");
                return (
                    fail_closed(&mut child, &task, &guard, &console, terminal, &why),
                    None,
                );
            }
        }
        drop(done_tx);
        // R8.11: the ptys follow our terminal's size.
        let mut sizes = super::pty::Sizes::new();
        let mut winch = if outputs.is_pty() {
            runtime.block_on(async {
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok()
            })
        } else {
            None
        };

        let (exit_tx, exit_rx) = tokio::sync::oneshot::channel::<io::Result<ExitStatus>>();
        // R2.8, R8.1: stops and continues of the command reach the loop too.
        let (jobs_tx, mut jobs_rx) = tokio::sync::mpsc::unbounded_channel();
        let slow_waiter = super::failpoint("slow-waiter");
        let waiter = if super::failpoint("waiter") {
            Err(io::Error::from_raw_os_error(libc::EAGAIN))
        } else {
            std::thread::Builder::new()
                .name("stallwarden-wait".into())
                .spawn(move || {
                    if slow_waiter {
                        // Widens the window between the command's exit and
                        // the loop's news of it, for the R8.9 test.
                        std::thread::sleep(Duration::from_secs(3));
                    }
                    let _ = exit_tx.send(super::jobs::wait(pid, &jobs_tx));
                })
        };
        if let Err(e) = waiter {
            let why = format!("cannot wait for the command: {e}");
            return (
                fail_closed(&mut child, &task, &guard, &console, terminal, &why),
                None,
            );
        }
        // The waiter reaps it from now on.
        drop(child);

        // R8.16: a kill refused is said; a SIGKILL refused ends the wait.
        let mut refusals = Refusals::watch(procs);
        // R8.9: a signal that arrives once the command has exited, before
        // the waiter's news of it does, is kept for the aftermath: it ends
        // the waits there, as one sent a moment later would.
        let mut late = None;
        let status = runtime.block_on(async {
            let mut exit_rx = exit_rx;
            let mut tick = tokio::time::interval(STATUS_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut pauses = Pauses::default();
            // R8.13: with on-input-wait = pause, budgets pause while the
            // command's foreground process reads the terminal.
            let watch_input = self.on_input_wait == stallwarden::config::OnInputWait::Pause
                && terminal.is_some();
            let mut input = super::input_wait::InputWait::default();
            let mut look = tokio::time::interval(super::input_wait::EVERY);
            look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    biased;
                    status = &mut exit_rx => break Some(status),
                    report = refusals.recv() => {
                        console.line(&super::refused::line(&report, self.profile.grace_period));
                        if report.signal == GroupSignal::Kill {
                            break None;
                        }
                    }
                    sig = incoming.recv() => {
                        if super::jobs::has_exited(pid) {
                            late.get_or_insert(sig);
                        } else {
                            signals::forward(pid, sig);
                            // R8.15: a run the user signalled is not restarted.
                            attempt.watch.signalled();
                        }
                    }
                    Some(job) = jobs_rx.recv() => {
                        if let super::jobs::Job::Stopped(sig) = job {
                            let from = Instant::now();
                            if super::jobs::suspend(sig, pid, &task, terminal.as_ref(), &|l| console.line(l)) {
                                pauses.add(from, Instant::now());
                            }
                        }
                    }
                    _ = look.tick(), if watch_input => {
                        if let Some(t) = terminal.as_ref() {
                            input.look(t.foreground_waits_for_input(), &task, &mut pauses);
                        }
                    }
                    _ = winched(&mut winch) => sizes.follow(&outputs.ptys(), pid),
                    _ = tick.tick(), if console.has_status_line() || outputs.is_pty() => {
                        sizes.follow(&outputs.ptys(), pid);
                        if !console.has_status_line() {
                            continue;
                        }
                        // R8.4: drawn only while the command is silent, and
                        // never where the user may be typing.
                        // R8.11: typed lines wait in the terminal: the
                        // cursor left the line's row; leave the line be.
                        if super::typing::input_queued(libc::STDERR_FILENO) {
                            console.forget_status();
                            continue;
                        }
                        let Some(s) = guard.status(&name) else { continue };
                        let silent = s.last_output_age.unwrap_or(s.elapsed) >= STATUS_EVERY;
                        // Redrawing keeps typeahead (src/cli/console.rs).
                        if silent && terminal.as_ref().is_none_or(Terminal::status_may_draw) {
                            console.status(&status_line(&s, &self.profile, &pauses, Instant::now()));
                        }
                    }
                }
            }
        });
        let Some(status) = status else {
            // R8.16: a command stallwarden may not kill: no wait for its
            // pipes or leftovers, which it holds as long as it likes.
            drop(terminal);
            console.clear_status();
            let _ = task.finish(Outcome::Cancelled, None, None);
            drop(task);
            if !guard.flush(FLUSH_BOUND) {
                console.line("stallwarden: some event sinks did not finish writing");
            }
            return (EXIT_GAVE_UP, None);
        };
        // R8.8: the command's exit ends the judging. Paused, the task takes
        // no verdict while stallwarden waits for pipes and leftovers; a cancel
        // dispatched before this point has set the flag by now.
        let _ = task.pause();
        let stopped = stop.stopped();
        // Ours again before stallwarden writes its last lines.
        drop(terminal);

        // R8.5, R8.6, R10.2: a bounded wait for the pipes, leaks named,
        // then nothing the command started outlives it unless kept; a
        // signal ends the waits (R8.9).
        let mut aftermath = Aftermath {
            done: done_rx,
            pumps,
            inodes,
            leak_timeout: self.leak_timeout,
            on_leftover: self.on_leftover,
            pgid: pid,
            grace: self.profile.grace_period,
            stopped,
            console: &console,
            task: &task,
            interrupted: false,
        };
        if let Some(sig) = late {
            aftermath.interrupt(sig);
        }
        runtime.block_on(aftermath.settle(&mut incoming));
        super::logging::notify_summary(_notify_socket.as_ref());
        super::logging::refused_summary(task.status().as_ref());
        console.clear_status();

        let mut died_of = None;
        let code = match status {
            Ok(Ok(status)) => {
                let (mut outcome, mut code) = settle(status, stopped);
                // R8.10: never 0 after output was lost; a command that died
                // of the SIGPIPE our closing caused failed to write, as GNU
                // tools report it: 1.
                let broke = status.signal() == Some(libc::SIGPIPE);
                if lost.lost() && (code == 0 || broke) {
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
        if !guard.flush(FLUSH_BOUND) {
            console.line("stallwarden: some event sinks did not finish writing");
        }
        drop(notify);
        (code, died_of)
    }
}

/// Descriptors the signal runtime opens: its epoll and waker, the signal
/// driver's socket pair and the driver's copy of one end.
const RUNTIME_DESCRIPTORS: usize = 5;

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

/// Resolves on the next SIGWINCH, never without one.
async fn winched(winch: &mut Option<tokio::signal::unix::Signal>) {
    match winch {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Maps the command's end to the task's outcome and our exit status (R8.2).
fn settle(status: ExitStatus, stopped_by_us: bool) -> (Outcome, u8) {
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

/// Picks the process-sampling interval for a profile (see `execute`).
///
/// With `net` renewing, a quarter of the budget: bytes count when the next
/// sample sees them, so a download whose first byte came just after a
/// sample at half the budget was seen only at the budget itself and could
/// be stopped though it met it (R5.11). At a quarter, a silence of up to
/// three quarters of the budget is always seen in time.
fn sample_interval(p: &Profile) -> Duration {
    let shortest = [p.idle_budget(), p.execution_budget(), p.startup_budget()]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(Duration::from_secs(30));
    let parts = if p.renewed_by.contains(SignalKind::Net) {
        4
    } else {
        2
    };
    (shortest / parts).clamp(Duration::from_secs(1), Duration::from_secs(15))
}

/// Stops the command when stallwarden cannot go on watching it (a pump or
/// the waiter could not be had, R8.9): a `cancelling` event with the
/// reason, SIGKILL to its group and to whatever escaped it, the command
/// reaped, `finished` as cancelled. Returns 124: stallwarden stopped it.
fn fail_closed(
    child: &mut std::process::Child,
    task: &TaskHandle,
    guard: &Guard,
    console: &Console,
    terminal: Option<Terminal>,
    why: &str,
) -> u8 {
    console.line(&format!("stallwarden: {why}; stopping the command"));
    let _ = task.cancel(why);
    signals::forward(child.id(), libc::SIGKILL);
    let _ = reaper::stop_all(Duration::ZERO, Duration::from_secs(2));
    let status = child.wait();
    drop(terminal);
    let signal = status.as_ref().ok().and_then(ExitStatus::signal);
    let code = status.as_ref().ok().and_then(ExitStatus::code);
    let _ = task.finish(Outcome::Cancelled, code, signal);
    if !guard.flush(FLUSH_BOUND) {
        console.line("stallwarden: some event sinks did not finish writing");
    }
    EXIT_STOPPED
}

/// Names the task after the command's file name (`sh`, `cargo`).
fn task_name(program: &OsString) -> String {
    Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "command".into())
}

/// An owner-only directory for the command's `NOTIFY_SOCKET`, removed on drop.
struct NotifyPlace {
    dir: PathBuf,
    path: PathBuf,
}

impl NotifyPlace {
    /// Makes the directory with the core's one owner-only helper (R10.6):
    /// created 0700 in TMPDIR, checked a directory of this user.
    fn create() -> Result<NotifyPlace, String> {
        let base = std::env::temp_dir();
        let dir = stallwarden::sys::private_dir(&base, "stallwarden-")
            .map_err(|e| format!("{e} (TMPDIR)"))?;
        let path = dir.join("notify.sock");
        Ok(NotifyPlace { dir, path })
    }
}

impl Drop for NotifyPlace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
