//! The spawn stage of `run` (R10.7): the command started in its own process
//! group with its outputs wired (two pipes, one shared pipe or ptys, R8.11)
//! and the terminal handed to it (R8.1), its task in the guard, the pumps
//! copying its output to ours (R8.10) and the thread waiting for it.
//!
//! Fail closed (R8.9): once the command runs, a pump or waiter that cannot
//! be had kills its group and exits 124, never 125.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use stallwarden::sources::notify::{NotifySocket, PendingNotifySocket};
use stallwarden::{Guard, Outcome, TaskHandle};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;

use super::super::console::{Console, Stream};
use super::super::jobs::{self, Job};
use super::super::outputs::{Outputs, Readers};
use super::super::pumps::{OutputLost, PendingOutput, Pump, PumpWatch};
use super::super::restart::Restarted;
use super::super::stream::Tap;
use super::super::terminal::Terminal;
use super::super::{failpoint, reaper, signals, EXIT_ERROR, EXIT_STOPPED, FAIL_VAR};
use super::arm::Armed;
use super::{Run, FLUSH_BOUND};

/// The command once started: what exists from the exec on, handed to the
/// watch stage.
pub(super) struct Spawned {
    /// The command's pid, which is its process group.
    pub(super) pid: u32,
    /// The task's name: the command's file name.
    pub(super) name: String,
    /// The command's task in the guard.
    pub(super) task: TaskHandle,
    /// The command's outputs (their ptys, whose size follows ours).
    pub(super) outputs: Outputs,
    /// The terminal the command was handed, if stdin is one.
    pub(super) terminal: Option<Terminal>,
    /// The waiter thread's news of the exit.
    pub(super) exit: oneshot::Receiver<io::Result<ExitStatus>>,
    /// Stops and continues of the command (R2.8, R8.1).
    pub(super) jobs: UnboundedReceiver<Job>,
    /// What the aftermath drains.
    pub(super) drain: Drain,
    /// The command's `NOTIFY_SOCKET`.
    pub(super) notify: Notify,
}

/// The pumps as the aftermath needs them (R8.5, R8.10).
pub(super) struct Drain {
    /// One message per pump that is done with its pipe.
    pub(super) done: UnboundedReceiver<()>,
    /// How many pumps run.
    pub(super) pumps: usize,
    /// The inodes of the command's stdout and stderr pipes.
    pub(super) inodes: HashSet<u64>,
    /// Set when some of the command's output could not be written.
    pub(super) lost: OutputLost,
}

/// The command's `NOTIFY_SOCKET` (R5.6): its directory, removed when
/// dropped, and the socket once served.
pub(super) struct Notify {
    /// The owner-only directory the socket is in.
    pub(super) place: Option<NotifyPlace>,
    /// The socket, served once the task exists.
    pub(super) socket: Option<NotifySocket>,
}

impl Spawned {
    /// Starts the command under `armed`'s guard and its pumps and waiter;
    /// on failure, says why and returns the exit status: 125 before the
    /// command ran (126/127 when it cannot be run), 124 once it did.
    pub(super) fn start(
        run: &Run,
        armed: &Armed,
        restarted: Option<Restarted>,
    ) -> Result<Spawned, u8> {
        let console = &armed.console;
        // R8.6: orphans of the command's tree come to us, not to init.
        if let Err(e) = reaper::become_subreaper() {
            tracing::warn!(error = %e, "not a child subreaper: escaped processes go to init");
        }
        let place = NotifyPlace::create()
            .map_err(|e| console.line(&format!("stallwarden: no NOTIFY_SOCKET: {e}")))
            .ok();
        let (mut child, mut outputs, terminal, pending) = exec(run, console, place.as_ref())?;
        let pid = child.id();
        if let Some(t) = &terminal {
            t.hand_to(pid);
        }
        let name = task_name(&run.command[0]);
        let task = start_task(armed, &name, run, &mut child)?;
        if let Some(r) = restarted {
            let _ = task.restarted(r.count, r.delay, r.last_stall);
        }
        let socket = pending.and_then(|pending| {
            pending
                .attach(task.recorder())
                .map_err(|e| console.line(&format!("stallwarden: no NOTIFY_SOCKET: {e}")))
                .ok()
        });
        let mut failed = Failed {
            child: &mut child,
            task: &task,
            guard: &armed.guard,
            console,
            terminal,
        };
        let drain = match outputs.readers(failed.child) {
            Ok(readers) => pump(run, armed, &task, readers),
            Err(e) => Err(format!("cannot read the command's output: {e}")),
        };
        let waited = drain.and_then(|drain| wait(pid).map(|(exit, jobs)| (drain, exit, jobs)));
        let (drain, exit, jobs) = match waited {
            Ok(started) => started,
            Err(why) => return Err(failed.close(&why)),
        };
        let terminal = failed.terminal.take();
        // The waiter reaps it from now on.
        drop(child);
        Ok(Spawned {
            pid,
            name,
            task,
            outputs,
            terminal,
            exit,
            jobs,
            drain,
            notify: Notify { place, socket },
        })
    }
}

/// Starts the command with its outputs wired and the terminal and a
/// `NOTIFY_SOCKET` prepared; on failure, says why and returns the exit
/// status.
fn exec(
    run: &Run,
    console: &Console,
    place: Option<&NotifyPlace>,
) -> Result<
    (
        Child,
        Outputs,
        Option<Terminal>,
        Option<PendingNotifySocket>,
    ),
    u8,
> {
    let program = &run.command[0];
    let mut command = Command::new(program);
    command
        .args(&run.command[1..])
        .process_group(0)
        .stdin(Stdio::inherit())
        .env_remove(FAIL_VAR);
    // R8.11: two pipes, one shared pipe, or ptys (src/cli/outputs.rs).
    let mut outputs = match Outputs::prepare(run.pty, run.shared)
        .and_then(|o| o.wire(&mut command).map(|()| o))
    {
        Ok(o) => o,
        Err(e) => {
            let what = if run.pty {
                "a pseudo-terminal"
            } else {
                "a pipe"
            };
            eprintln!("stallwarden: cannot open {what} for the command's output: {e}");
            return Err(EXIT_ERROR);
        }
    };
    // R8.1: an interactive command gets the terminal (src/cli/terminal.rs).
    let terminal = Terminal::prepare(&mut command);
    // Bound before the spawn so nothing the command sends in its first
    // instants is lost; served once the task (which needs the pid for its
    // `started` event, R8.3) exists.
    let pending = place.and_then(|place| {
        NotifySocket::prepare(&place.path)
            .map_err(|e| console.line(&format!("stallwarden: no NOTIFY_SOCKET: {e}")))
            .ok()
    });
    if let Some(pending) = &pending {
        command.env("NOTIFY_SOCKET", pending.path());
    } else if std::env::var_os("NOTIFY_SOCKET").is_some() {
        // Never our parent's socket: the command's datagrams would reach a
        // manager that is not watching it, unseen by us.
        command.env_remove("NOTIFY_SOCKET");
        console.line(
            "stallwarden: the command runs without NOTIFY_SOCKET (the inherited one is removed)",
        );
    }
    // R8.12: as execvp, a file without `#!` runs through /bin/sh.
    let spawned = super::super::exec::spawn(&mut command, program, terminal.as_ref(), &outputs);
    // The child's ends of its outputs are held by `command` and `outputs`:
    // ours must close, or the pumps never see the end (R8.5).
    drop(command);
    outputs.spawned();
    match spawned {
        Ok(child) => Ok((child, outputs, terminal, pending)),
        Err((line, code)) => {
            eprintln!("{line}");
            Err(code)
        }
    }
}

/// Starts the command's task in the guard; on failure (unreachable with a
/// validated profile), kills the command, never leaving it running
/// unwatched, and returns 125.
fn start_task(armed: &Armed, name: &str, run: &Run, child: &mut Child) -> Result<TaskHandle, u8> {
    let pid = child.id();
    armed
        .guard
        .start_process(name.to_owned(), run.profile.clone(), pid)
        .map_err(|e| {
            eprintln!("stallwarden: cannot watch the command: {e}");
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            EXIT_ERROR
        })
}

/// Starts one pump per output (R8.10), each feeding the task's recorder;
/// returns what the aftermath drains, or why a pump could not be had.
fn pump(run: &Run, armed: &Armed, task: &TaskHandle, readers: Readers) -> Result<Drain, String> {
    let (done_tx, done) = unbounded_channel::<()>();
    let lost = OutputLost::default();
    let inodes: HashSet<u64> = readers.keys.iter().copied().collect();
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
    for ((from, to), watch_pump) in readers.files.into_iter().zip(watches) {
        pumps += 1;
        let pump = Pump {
            recorder: task.recorder(),
            console: Arc::clone(&armed.console),
            to,
            done: done_tx.clone(),
            // R5.10: the agent's JSON lines are on its stdout.
            tap: (to == Stream::Stdout)
                .then_some(run.stream)
                .flatten()
                .map(|f| Tap::new(f, task.recorder())),
            lost: lost.clone(),
            seen: armed.seen.clone(),
            watch: watch_pump,
        };
        if let Err(e) = pump.spawn(from) {
            let to = match to {
                Stream::Stdout => "stdout",
                Stream::Stderr => "stderr",
            };
            return Err(format!("cannot copy the command's {to}: {e}"));
        }
    }
    Ok(Drain {
        done,
        pumps,
        inodes,
        lost,
    })
}

/// The waiter's news of the exit and the stops and continues on the way.
type Waited = (
    oneshot::Receiver<io::Result<ExitStatus>>,
    UnboundedReceiver<Job>,
);

/// Starts the thread that waits for the command `pid` (R2.8, R8.1: stops
/// and continues reach the loop too); or why it could not be had.
fn wait(pid: u32) -> Result<Waited, String> {
    let (exit_tx, exit_rx) = oneshot::channel::<io::Result<ExitStatus>>();
    let (jobs_tx, jobs_rx): (UnboundedSender<Job>, _) = unbounded_channel();
    let slow_waiter = failpoint("slow-waiter");
    let waiter = if failpoint("waiter") {
        Err(io::Error::from_raw_os_error(libc::EAGAIN))
    } else {
        std::thread::Builder::new()
            .name("stallwarden-wait".into())
            .spawn(move || {
                if slow_waiter {
                    // Widens the window between the command's exit and the
                    // loop's news of it, for the R8.9 test.
                    std::thread::sleep(Duration::from_secs(3));
                }
                let _ = exit_tx.send(jobs::wait(pid, &jobs_tx));
            })
    };
    match waiter {
        Ok(_) => Ok((exit_rx, jobs_rx)),
        Err(e) => Err(format!("cannot wait for the command: {e}")),
    }
}

/// What stopping the command needs when stallwarden cannot go on watching
/// it (R8.9).
struct Failed<'a> {
    child: &'a mut Child,
    task: &'a TaskHandle,
    guard: &'a Guard,
    console: &'a Console,
    terminal: Option<Terminal>,
}

impl Failed<'_> {
    /// Stops the command when stallwarden cannot go on watching it (a pump
    /// or the waiter could not be had, R8.9): a `cancelling` event with the
    /// reason, SIGKILL to its group and to whatever escaped it, the command
    /// reaped, `finished` as cancelled. Returns 124: stallwarden stopped it.
    fn close(&mut self, why: &str) -> u8 {
        self.console
            .line(&format!("stallwarden: {why}; stopping the command"));
        let _ = self.task.cancel(why);
        signals::forward(self.child.id(), libc::SIGKILL);
        let _ = reaper::stop_all(Duration::ZERO, Duration::from_secs(2));
        let status = self.child.wait();
        drop(self.terminal.take());
        let signal = status.as_ref().ok().and_then(ExitStatus::signal);
        let code = status.as_ref().ok().and_then(ExitStatus::code);
        let _ = self.task.finish(Outcome::Cancelled, code, signal);
        if !self.guard.flush(FLUSH_BOUND) {
            self.console
                .line("stallwarden: some event sinks did not finish writing");
        }
        EXIT_STOPPED
    }
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
pub(super) struct NotifyPlace {
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
