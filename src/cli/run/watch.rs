//! The watch stage of `run` (R10.7): the loop that watches the started
//! command, under what the arm stage made, until it exits, or until a
//! SIGKILL stallwarden may not send ends the wait (R8.16).
//!
//! While it loops it owns the sampler (R5.5), the escaped-process probe and
//! the orphan reaper (R8.6), the control socket (R6.5), the input wait
//! (R8.13), job control (R2.8) and the live status line (R8.4); what the
//! settle stage needs comes out as a [`Watched`].

use std::io;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stallwarden::control::ControlServer;
use stallwarden::sinks::process::GroupSignal;
use stallwarden::sources::procs::ProcessSampler;
use stallwarden::{Guard, Profile, SignalKind, TaskHandle};
use tokio::runtime::Runtime;
use tokio::sync::oneshot::error::RecvError;

use super::super::console::Console;
use super::super::input_wait::InputWait;
use super::super::jobs::{self, Job};
use super::super::outputs::Outputs;
use super::super::pty::Sizes;
use super::super::reaper::{OrphanReaper, WithEscaped};
use super::super::refused::Refusals;
use super::super::report::{status_line, Pauses, StopFlag};
use super::super::restart;
use super::super::signals::{self, Incoming};
use super::super::terminal::Terminal;
use super::arm::Armed;
use super::spawn::{Drain, Notify, Spawned};
use super::Run;

/// How often the live status line is redrawn, and how long the command
/// must have been silent for it to be (R8.4).
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// How the command ended, as the waiter thread sent it: its status, the
/// error of its wait, or no word at all (the waiter is gone).
pub(super) type Exit = Result<io::Result<ExitStatus>, RecvError>;

/// What the watch stage hands to the settle stage once the loop is over.
pub(super) struct Watched {
    /// How the command ended; `None` when a SIGKILL was refused and the
    /// wait was given up (R8.16).
    pub(super) exit: Option<Exit>,
    /// A signal that came after the command's exit, before the waiter's
    /// news of it: it ends the aftermath's waits (R8.9).
    pub(super) late: Option<i32>,
    /// The command's task in the guard.
    pub(super) task: TaskHandle,
    /// The command's pid, which is its process group.
    pub(super) pid: u32,
    /// The terminal, handed back to stallwarden when dropped.
    pub(super) terminal: Option<Terminal>,
    /// What the aftermath drains: the pumps and their pipes.
    pub(super) drain: Drain,
    /// The command's `NOTIFY_SOCKET`, for its summary.
    pub(super) notify: Notify,
    /// What lives to the end of the run without being looked at again.
    pub(super) _kept: Kept,
    /// Set when stallwarden stopped the command.
    pub(super) stop: StopFlag,
    /// Signals that end the aftermath's waits (R8.9).
    pub(super) incoming: Incoming,
    /// The runtime the aftermath runs on.
    pub(super) runtime: Runtime,
    /// The guard, flushed last.
    pub(super) guard: Guard,
    /// Where stallwarden's own lines go.
    pub(super) console: Arc<Console>,
}

/// What the watch stage started, kept running through the aftermath and
/// dropped with the run: sampling names leftovers' suspects while the
/// pipes drain, and the control socket answers until the end.
pub(super) struct Kept {
    _refusals: Refusals,
    _winch: Option<tokio::signal::unix::Signal>,
    _reaper: OrphanReaper,
    _control: Option<ControlServer>,
    _escaped: Option<Arc<WithEscaped>>,
    _sampler: Option<ProcessSampler>,
    _outputs: Outputs,
}

impl Watched {
    /// Watches the started command until it exits (or a refused SIGKILL
    /// ends the wait); forwards signals, follows job control, pauses for
    /// input and draws the status line meanwhile.
    pub(super) fn watch(
        armed: Armed,
        run: &Run,
        restart: &restart::Watch,
        spawned: Spawned,
    ) -> Watched {
        let Spawned {
            pid,
            name,
            task,
            outputs,
            terminal,
            exit,
            jobs,
            drain,
            notify,
        } = spawned;
        let Armed {
            console,
            guard,
            seen: _,
            stop,
            procs,
            mut incoming,
            runtime,
        } = armed;
        // R5.5: sample the descendants so stall lines name suspects.
        let sampler =
            ProcessSampler::spawn(pid, sample_interval(&run.profile), Some(task.recorder()))
                .map_err(|e| console.line(&format!("stallwarden: no process sampling: {e}")))
                .ok();
        // R8.6: escaped descendants are named among the suspects too.
        let escaped = sampler
            .as_ref()
            .and_then(|s| WithEscaped::attach(pid, s.probe(), s.interval(), &task.recorder()));
        let control = run.socket.as_ref().and_then(|path| {
            ControlServer::bind(path, guard.clone())
                .map_err(|e| console.line(&format!("stallwarden: no control socket: {e}")))
                .ok()
        });
        let reaper = OrphanReaper::spawn(pid, Duration::from_millis(500));
        // R8.11: the ptys follow our terminal's size.
        let winch = if outputs.is_pty() {
            runtime.block_on(async {
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok()
            })
        } else {
            None
        };
        let mut looking = Looking {
            run,
            restart,
            console: &console,
            guard: &guard,
            task: &task,
            name: &name,
            pid,
            terminal: terminal.as_ref(),
            outputs: &outputs,
            sizes: Sizes::new(),
            winch,
            // R8.16: a kill refused is said; a SIGKILL refused ends the wait.
            refusals: Refusals::watch(procs),
            late: None,
        };
        let exit = runtime.block_on(looking.until_exit(exit, jobs, &mut incoming));
        let Looking {
            late,
            winch,
            refusals,
            ..
        } = looking;
        Watched {
            exit,
            late,
            task,
            pid,
            terminal,
            drain,
            notify,
            stop,
            incoming,
            runtime,
            _kept: Kept {
                _refusals: refusals,
                _winch: winch,
                _reaper: reaper,
                _control: control,
                _escaped: escaped,
                _sampler: sampler,
                _outputs: outputs,
            },
            guard,
            console,
        }
    }
}

/// The loop's state and what it borrows from the stages around it.
struct Looking<'a> {
    run: &'a Run,
    restart: &'a restart::Watch,
    console: &'a Console,
    guard: &'a Guard,
    task: &'a TaskHandle,
    name: &'a str,
    pid: u32,
    terminal: Option<&'a Terminal>,
    outputs: &'a Outputs,
    sizes: Sizes,
    winch: Option<tokio::signal::unix::Signal>,
    refusals: Refusals,
    /// R8.9: a signal that arrives once the command has exited, before the
    /// waiter's news of it does, is kept for the aftermath: it ends the
    /// waits there, as one sent a moment later would.
    late: Option<i32>,
}

impl Looking<'_> {
    /// Loops until the waiter's news of the exit, or `None` once a SIGKILL
    /// was refused (R8.16).
    async fn until_exit(
        &mut self,
        mut exit: tokio::sync::oneshot::Receiver<io::Result<ExitStatus>>,
        mut jobs: tokio::sync::mpsc::UnboundedReceiver<Job>,
        incoming: &mut Incoming,
    ) -> Option<Exit> {
        let mut tick = tokio::time::interval(STATUS_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut pauses = Pauses::default();
        // R8.13: with on-input-wait = pause, budgets pause while the
        // command's foreground process reads the terminal.
        let watch_input = self.run.on_input_wait == stallwarden::config::OnInputWait::Pause
            && self.terminal.is_some();
        let mut input = InputWait::default();
        let mut look = tokio::time::interval(super::super::input_wait::EVERY);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                biased;
                status = &mut exit => break Some(status),
                report = self.refusals.recv() => {
                    let grace = self.run.profile.grace_period;
                    self.console.line(&super::super::refused::line(&report, grace));
                    if report.signal == GroupSignal::Kill {
                        break None;
                    }
                }
                sig = incoming.recv() => self.signalled(sig),
                Some(job) = jobs.recv() => {
                    if let Job::Stopped(sig) = job {
                        let from = Instant::now();
                        let line = |l: &str| self.console.line(l);
                        if jobs::suspend(sig, self.pid, self.task, self.terminal, &line) {
                            pauses.add(from, Instant::now());
                        }
                    }
                }
                _ = look.tick(), if watch_input => {
                    if let Some(t) = self.terminal {
                        input.look(t.foreground_waits_for_input(), self.task, &mut pauses);
                    }
                }
                _ = winched(&mut self.winch) => self.sizes.follow(&self.outputs.ptys(), self.pid),
                _ = tick.tick(), if self.console.has_status_line() || self.outputs.is_pty() => {
                    self.sizes.follow(&self.outputs.ptys(), self.pid);
                    self.draw_status(&pauses);
                }
            }
        }
    }

    /// A signal to stallwarden: forwarded to the command's group, or kept
    /// for the aftermath when the command has exited already (R8.9).
    fn signalled(&mut self, sig: i32) {
        if jobs::has_exited(self.pid) {
            self.late.get_or_insert(sig);
        } else {
            signals::forward(self.pid, sig);
            // R8.15: a run the user signalled is not restarted.
            self.restart.signalled();
        }
    }

    /// Redraws the live status line, if there is one (R8.4): only while
    /// the command is silent, and never where the user may be typing.
    fn draw_status(&self, pauses: &Pauses) {
        if !self.console.has_status_line() {
            return;
        }
        // R8.11: typed lines wait in the terminal: the cursor left the
        // line's row; leave the line be.
        if super::super::typing::input_queued(libc::STDERR_FILENO) {
            self.console.forget_status();
            return;
        }
        let Some(s) = self.guard.status(self.name) else {
            return;
        };
        let silent = s.last_output_age.unwrap_or(s.elapsed) >= STATUS_EVERY;
        // Redrawing keeps typeahead (src/cli/console.rs).
        if silent && self.terminal.is_none_or(Terminal::status_may_draw) {
            let line = status_line(&s, &self.run.profile, pauses, Instant::now());
            self.console.status(&line);
        }
    }
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

/// Picks the process-sampling interval for a profile (R5.5): half the
/// shortest silence budget, within 1 s..=15 s (15 s is R5.5's default),
/// so that with a 3 s budget two samples (and so a CPU delta) exist by the
/// time the stall is judged.
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
