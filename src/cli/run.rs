//! `stallguard run [OPTIONS] -- CMD [ARGS...]` (R8.1–R8.4): one task around
//! one command in its own process group.
//!
//! Threads: two blocking pumps copy the command's stdout and stderr to ours
//! through counting readers (each read is an `output` signal); one thread
//! waits for the command; the main thread runs a small current-thread tokio
//! runtime for SIGINT/SIGTERM forwarding and the status line. Verdicts come
//! from the guard's own driver thread (R6.3), never from this runtime.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stallguard::config::OnLeftover;
use stallguard::sinks::control::ControlServer;
use stallguard::sinks::jsonl::JsonLinesSink;
use stallguard::sinks::process::ProcessSink;
use stallguard::sources::notify::NotifySocket;
use stallguard::sources::output::CountingReader;
use stallguard::sources::procs::ProcessSampler;
use stallguard::{Guard, Outcome, Profile, Recorder, Sink};

use super::aftermath::Aftermath;
use super::args::RunArgs;
use super::console::{Console, Stream};
use super::reaper::{self, EscapedSignals, OrphanReaper, WithEscaped};
use super::report::{status_line, Pauses, StopFlag, VerdictLines};
use super::stream::Tap;
use super::terminal::Terminal;
use super::{check, EXIT_ERROR, EXIT_STOPPED};

/// How long isolated sinks (the events file) get to catch up before exit.
const FLUSH_BOUND: Duration = Duration::from_secs(5);
/// How often the live status line is redrawn, and how long the command
/// must have been silent for it to be (R8.4).
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// Runs `run`; returns the process exit status (R8.2).
pub(crate) fn run(args: RunArgs) -> u8 {
    match Run::prepare(args) {
        Ok(run) => run.execute(),
        Err(message) => {
            eprintln!("stallguard: {message}");
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
    stream: Option<stallguard::sources::agent::Format>,
    leak_timeout: Duration,
    on_leftover: OnLeftover,
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
            let flag = super::inputs::flag_of(e.key);
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
        })
    }

    fn execute(self) -> u8 {
        let console = Arc::new(Console::new(self.status_line));
        let stop = StopFlag::default();
        let mut builder = Guard::builder()
            .sink(stop.clone())
            .sink(ProcessSink::new())
            .sink(EscapedSignals)
            .sink(VerdictLines {
                console: Arc::clone(&console),
                profile: self.profile.clone(),
            });
        if let Some(events) = self.events {
            // R8.7: a failing events file is said once, out loud.
            builder = builder.sink(super::loud::LoudOnFailure::new(
                events,
                Arc::clone(&console),
            ));
        }
        let guard = builder.build();

        // Signals are caught before the command starts, so a SIGTERM that
        // arrives early is forwarded, not fatal to us alone.
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("stallguard: cannot start the signal runtime: {e}");
                return EXIT_ERROR;
            }
        };
        let signals = runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            Ok::<_, io::Error>((
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            ))
        });
        let (mut sigint, mut sigterm) = match signals {
            Ok(s) => s,
            Err(e) => {
                eprintln!("stallguard: cannot catch SIGINT/SIGTERM: {e}");
                return EXIT_ERROR;
            }
        };

        // R8.6: orphans of the command's tree come to us, not to init.
        if let Err(e) = reaper::become_subreaper() {
            tracing::warn!(error = %e, "not a child subreaper: escaped processes go to init");
        }
        let notify = NotifyPlace::create()
            .map_err(|e| console.line(&format!("stallguard: no NOTIFY_SOCKET: {e}")))
            .ok();
        let program = &self.command[0];
        let mut command = Command::new(program);
        command
            .args(&self.command[1..])
            .process_group(0)
            .stdin(Stdio::inherit())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // R8.1: an interactive command gets the terminal (src/cli/terminal.rs).
        let terminal = Terminal::prepare(&mut command);
        // Bound before the spawn so nothing the command sends in its first
        // instants is lost; served once the task (which needs the pid for
        // its `started` event, R8.3) exists.
        let pending_notify = notify.as_ref().and_then(|place| {
            NotifySocket::prepare(&place.path)
                .map_err(|e| console.line(&format!("stallguard: no NOTIFY_SOCKET: {e}")))
                .ok()
        });
        if let Some(pending) = &pending_notify {
            command.env("NOTIFY_SOCKET", pending.path());
        } else if std::env::var_os("NOTIFY_SOCKET").is_some() {
            // Never our parent's socket: the command's datagrams would
            // reach a manager that is not watching it, unseen by us.
            command.env_remove("NOTIFY_SOCKET");
            console.line(
                "stallguard: the command runs without NOTIFY_SOCKET (the inherited one is removed)",
            );
        }
        // R8.12: as execvp, a file without `#!` runs through /bin/sh.
        let mut child = match super::exec::spawn(&mut command, program, terminal.as_ref()) {
            Ok(c) => c,
            Err((line, code)) => {
                eprintln!("{line}");
                return code;
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
                eprintln!("stallguard: cannot watch the command: {e}");
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
                return EXIT_ERROR;
            }
        };

        let _notify_socket = pending_notify.and_then(|pending| {
            pending
                .attach(task.recorder())
                .map_err(|e| console.line(&format!("stallguard: no NOTIFY_SOCKET: {e}")))
                .ok()
        });
        // R5.5: sample the descendants so stall lines name suspects. The
        // interval is half the shortest silence budget, within 1 s..=15 s
        // (15 s is R5.5's default): with a 3 s budget, two samples (and so
        // a CPU delta) exist by the time the stall is judged.
        let _sampler =
            ProcessSampler::spawn(pid, sample_interval(&self.profile), Some(task.recorder()))
                .map_err(|e| console.line(&format!("stallguard: no process sampling: {e}")))
                .ok();
        // R8.6: escaped descendants are named among the suspects too.
        let _escaped = _sampler
            .as_ref()
            .and_then(|s| WithEscaped::attach(pid, s.probe(), s.interval(), &task.recorder()));
        let _control = self.socket.as_ref().and_then(|path| {
            ControlServer::bind(path, guard.clone())
                .map_err(|e| console.line(&format!("stallguard: no control socket: {e}")))
                .ok()
        });

        let _reaper = OrphanReaper::spawn(pid, Duration::from_millis(500));
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let inodes: std::collections::HashSet<u64> = [
            child.stdout.as_ref().and_then(super::leaks::pipe_inode),
            child.stderr.as_ref().and_then(super::leaks::pipe_inode),
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut pumps = 0;
        if let Some(out) = child.stdout.take() {
            pumps += 1;
            let tap = self.stream.map(|f| Tap::new(f, task.recorder()));
            pump(
                out,
                task.recorder(),
                &console,
                Stream::Stdout,
                done_tx.clone(),
                tap,
            );
        }
        if let Some(err) = child.stderr.take() {
            pumps += 1;
            pump(
                err,
                task.recorder(),
                &console,
                Stream::Stderr,
                done_tx.clone(),
                None,
            );
        }
        drop(done_tx);

        let (exit_tx, exit_rx) = tokio::sync::oneshot::channel::<io::Result<ExitStatus>>();
        // R2.8, R8.1: stops and continues of the command reach the loop too.
        let (jobs_tx, mut jobs_rx) = tokio::sync::mpsc::unbounded_channel();
        drop(child);
        let waiter = std::thread::Builder::new()
            .name("stallguard-wait".into())
            .spawn(move || {
                let _ = exit_tx.send(super::jobs::wait(pid, &jobs_tx));
            });
        if let Err(e) = waiter {
            eprintln!("stallguard: cannot wait for the command: {e}");
            return EXIT_ERROR;
        }

        let status = runtime.block_on(async {
            let mut exit_rx = exit_rx;
            let mut tick = tokio::time::interval(STATUS_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut pauses = Pauses::default();
            loop {
                tokio::select! {
                    status = &mut exit_rx => break status,
                    _ = sigint.recv() => forward(pid, nix::sys::signal::Signal::SIGINT),
                    _ = sigterm.recv() => forward(pid, nix::sys::signal::Signal::SIGTERM),
                    Some(job) = jobs_rx.recv() => {
                        if let super::jobs::Job::Stopped(sig) = job {
                            let from = Instant::now();
                            if super::jobs::suspend(sig, pid, &task, terminal.as_ref(), &|l| console.line(l)) {
                                pauses.add(from, Instant::now());
                            }
                        }
                    }
                    _ = tick.tick(), if console.has_status_line() => {
                        // R8.4: drawn only while the command is silent, and
                        // never where the user may be typing.
                        let Some(s) = guard.status(&name) else { continue };
                        let silent = s.last_output_age.unwrap_or(s.elapsed) >= STATUS_EVERY;
                        // A line already drawn stays until the command
                        // writes: erasing it now could erase what was typed.
                        if silent && terminal.as_ref().is_none_or(Terminal::status_may_draw) {
                            console.status(&status_line(&s, &self.profile, &pauses, Instant::now()));
                        }
                    }
                }
            }
        });
        // Ours again before stallguard writes its last lines.
        drop(terminal);

        // R8.5, R8.6, R10.2: a bounded wait for the pipes, leaks named,
        // then nothing the command started outlives it unless kept.
        Aftermath {
            done: done_rx,
            pumps,
            inodes,
            leak_timeout: self.leak_timeout,
            on_leftover: self.on_leftover,
            pgid: pid,
            grace: self.profile.grace_period,
            stopped: stop.stopped(),
            console: &console,
            task: &task,
        }
        .settle();
        super::logging::notify_summary(_notify_socket.as_ref());
        console.clear_status();

        let code = match status {
            Ok(Ok(status)) => {
                let stopped = stop.stopped();
                let (outcome, code) = settle(status, stopped);
                let _ = task.finish(outcome, status.code(), status.signal());
                code
            }
            Ok(Err(e)) => {
                console.line(&format!("stallguard: cannot wait for the command: {e}"));
                task.finish_failed();
                EXIT_ERROR
            }
            Err(_) => {
                console.line("stallguard: lost track of the command");
                task.finish_failed();
                EXIT_ERROR
            }
        };
        drop(task);
        if !guard.flush(FLUSH_BOUND) {
            console.line("stallguard: some event sinks did not finish writing");
        }
        drop(notify);
        code
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
fn sample_interval(p: &Profile) -> Duration {
    let shortest = [p.idle_budget(), p.execution_budget(), p.startup_budget()]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(Duration::from_secs(30));
    (shortest / 2).clamp(Duration::from_secs(1), Duration::from_secs(15))
}

/// Forwards a signal stallguard received to the command's process group,
/// then continues the group: a stopped command (Ctrl-Z, `kill -STOP`)
/// still acts on SIGINT/SIGTERM and ends the run (R8.1).
fn forward(pgid: u32, sig: nix::sys::signal::Signal) {
    let group = nix::unistd::Pid::from_raw(pgid as i32);
    let _ = nix::sys::signal::killpg(group, sig);
    if sig != nix::sys::signal::Signal::SIGKILL {
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGCONT);
    }
}

/// Copies one of the command's streams to ours on a thread of its own,
/// unchanged and flushed per read; each read is an `output` signal (R5.1).
/// With a `tap` (R5.10), each read is then also parsed as agent events.
fn pump(
    from: impl Read + Send + 'static,
    recorder: Recorder,
    console: &Arc<Console>,
    to: Stream,
    done: mpsc::Sender<()>,
    mut tap: Option<Tap>,
) {
    let console = Arc::clone(console);
    let spawned = std::thread::Builder::new()
        .name(format!("stallguard-{to:?}").to_lowercase())
        .spawn(move || {
            let mut reader = CountingReader::new(from, recorder);
            let mut buf = vec![0u8; 64 * 1024];
            let mut writable = true;
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    // If our own stream is closed, keep draining the
                    // command's so it never blocks on a full pipe.
                    Ok(n) => {
                        if writable {
                            writable = console.command_output(to, &buf[..n]).is_ok();
                        }
                        if let Some(tap) = &mut tap {
                            tap.feed(&buf[..n]);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            if let Some(tap) = &mut tap {
                tap.finish();
            }
            let _ = done.send(());
        });
    if let Err(e) = spawned {
        console_error(&e);
    }
}

fn console_error(e: &io::Error) {
    eprintln!("stallguard: cannot copy the command's output: {e}");
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
    fn create() -> Result<NotifyPlace, String> {
        let base = std::env::temp_dir();
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let dir = base.join(format!(
                "stallguard-{}-{nanos:x}-{attempt}",
                std::process::id()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let path = dir.join("notify.sock");
                    return Ok(NotifyPlace { dir, path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(format!(
                        "cannot create a directory in {} (TMPDIR): {e}",
                        base.display()
                    ))
                }
            }
        }
        Err(format!("no free directory name in {}", base.display()))
    }
}

impl Drop for NotifyPlace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
