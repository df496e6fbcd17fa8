//! Job control (R2.8, R8.1): what happens to the command besides exiting.
//!
//! The waiter thread waits with `WUNTRACED | WCONTINUED`, so a stop (Ctrl-Z
//! on the terminal, `kill -STOP`, SIGTTIN from a read in the background)
//! and a continue reach the run loop as [`Job`] values, and the exit as
//! before. What the run loop does with a stop is [`suspend`]: as a shell
//! would, stallwarden pauses the task (every budget, the deadline included,
//! R2.8), takes the terminal back and stops itself, so the shell that
//! started it shows the job stopped; `fg` or `bg` continues stallwarden,
//! which continues the command's group and resumes the budgets.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use super::terminal::Terminal;
use stallwarden::TaskHandle;

/// What the waiter saw happen to the command.
#[derive(Debug)]
pub(crate) enum Job {
    /// The command's process was stopped by this signal.
    Stopped(i32),
    /// The command's process was continued.
    Continued,
}

/// Waits for `pid` until it exits, sending each stop and continue on
/// `jobs` on the way; returns how it exited.
pub(crate) fn wait(
    pid: u32,
    jobs: &tokio::sync::mpsc::UnboundedSender<Job>,
) -> io::Result<ExitStatus> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid place for waitpid to write; the pid is
        // our own child, which nothing else waits for (the reaper reaps
        // re-parented processes by their own pids).
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED | libc::WCONTINUED) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if libc::WIFSTOPPED(status) {
            let _ = jobs.send(Job::Stopped(libc::WSTOPSIG(status)));
        } else if libc::WIFCONTINUED(status) {
            let _ = jobs.send(Job::Continued);
        } else {
            return Ok(ExitStatus::from_raw(status));
        }
    }
}

/// Whether `pid`, our child, has exited, without reaping it: a look with
/// `WNOWAIT` leaves the status for the waiter thread. `ECHILD` means the
/// waiter reaped it already, so that is an exit too. The run loop asks
/// when a signal arrives (R8.9): one that comes after the exit, before the
/// waiter's news does, belongs to the aftermath, not to the command.
pub(crate) fn has_exited(pid: u32) -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(nix::unistd::Pid::from_raw(raw)), flags) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) | Err(nix::errno::Errno::ECHILD) => true,
        // WNOHANG never blocks, so no EINTR either: any other error
        // (none is expected) leaves the signal to the command.
        Err(_) => false,
    }
}

/// Handles a stop of the command by `signal`. With the terminal in hand,
/// stallwarden suspends with it: pause, take the terminal back, stop itself;
/// when continued, hand the terminal back if it is in the foreground again,
/// continue the command's group and resume. Without a terminal (stdin is
/// not one), the stop is said on stderr and the budgets keep running: a
/// command left stopped there is a stall like any other. Returns whether
/// the task was paused.
pub(crate) fn suspend(
    signal: i32,
    pgid: u32,
    task: &TaskHandle,
    terminal: Option<&Terminal>,
    say: &dyn Fn(&str),
) -> bool {
    let name = signal_name(signal);
    let Some(terminal) = terminal else {
        say(&format!(
            "stallwarden: the command was stopped by {name}; its budgets keep running"
        ));
        task.set_step(format!("stopped by {name}"));
        return false;
    };
    let _ = task.pause();
    terminal.take_back();
    // SAFETY: raise has no preconditions; SIGSTOP stops the whole process
    // (the driver thread too) until the shell's SIGCONT.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
    if terminal.ours_in_foreground() {
        terminal.hand_to(pgid);
    }
    if let Ok(group) = libc::pid_t::try_from(pgid) {
        // SAFETY: killpg has no memory preconditions.
        unsafe {
            libc::killpg(group, libc::SIGCONT);
        }
    }
    let _ = task.resume();
    true
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}
