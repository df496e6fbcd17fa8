//! The controlling terminal (R8.1): when stdin is a terminal and stallwarden
//! is its foreground job, the command's process group gets the terminal,
//! as a shell or GNU `timeout --foreground` would give it, so an
//! interactive command reads and writes it as if run directly. Ctrl-C on
//! the terminal then reaches the command's group; stallwarden takes the
//! terminal back when the command is gone.
//!
//! When stdin is not a terminal, or stallwarden runs in the background,
//! nothing changes: the command keeps its own process group and never owns
//! the terminal.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Stdin, the descriptor a shell hands the terminal over on.
const TTY: libc::c_int = libc::STDIN_FILENO;

/// Stallwarden's hold on the terminal: given to the command by
/// [`Terminal::hand_to`], taken back on drop.
pub(crate) struct Terminal {
    /// Stallwarden's own process group, the terminal's foreground before.
    ours: libc::pid_t,
}

impl Terminal {
    /// Arranges for `command` (spawned in a process group of its own) to
    /// take the terminal before it execs, if stdin is a terminal whose
    /// foreground job is stallwarden; `None` (and `command` untouched)
    /// otherwise. Call [`Terminal::hand_to`] after the spawn too.
    pub(crate) fn prepare(command: &mut Command) -> Option<Terminal> {
        if !in_foreground() {
            return None;
        }
        // SAFETY: getpgrp has no preconditions.
        let ours = unsafe { libc::getpgrp() };
        let terminal = Terminal { ours };
        terminal.hook(command);
        // While the command holds the terminal, stallwarden still writes the
        // command's output and its own lines there, from the background:
        // with `stty tostop` each write would stop it with SIGTTOU. Blocked
        // on this thread, and so on every thread started after it (the
        // command itself starts with an empty mask: std resets it).
        block_ttou();
        Some(terminal)
    }

    /// Makes `command` take the terminal in the child before it execs (a
    /// second command built for the same run, such as the `/bin/sh`
    /// fallback of `src/cli/exec.rs`, needs it too).
    pub(crate) fn hook(&self, command: &mut Command) {
        // SAFETY: the hook runs in the forked child before exec and calls
        // only functions that are plain system calls (getpid, pthread_sigmask,
        // tcsetpgrp).
        // The parent does the same after the spawn, as shells do, so
        // whichever runs first wins the race with the command's first read.
        unsafe {
            command.pre_exec(|| {
                let _ = give(libc::getpid());
                Ok(())
            });
        }
    }

    /// Gives the terminal to the command's process group `pgid` (from the
    /// parent side; the child's own hand-over may already have done it).
    pub(crate) fn hand_to(&self, pgid: u32) {
        if let Ok(pgid) = libc::pid_t::try_from(pgid) {
            let _ = give(pgid);
        }
    }
}

impl Terminal {
    /// Takes the terminal back for stallwarden's own group, as before a
    /// job-control stop (the shell expects its job's group to hold it).
    pub(crate) fn take_back(&self) {
        let _ = give(self.ours);
    }

    /// Whether stallwarden's group is the terminal's foreground one now:
    /// after `fg` it is, after `bg` it is not.
    pub(crate) fn ours_in_foreground(&self) -> bool {
        // SAFETY: tcgetpgrp only reads the terminal's state.
        unsafe { libc::tcgetpgrp(TTY) == self.ours }
    }
}

impl Terminal {
    /// Whether the live status line (R8.4) may be drawn now without
    /// landing in what the user types. Yes while stallwarden's group holds
    /// the terminal. While the command's group (or a group of its tree)
    /// holds it: no in raw mode (the command draws the screen itself, as an
    /// editor or a line-editing REPL does), and no while one of its
    /// processes waits for input from the terminal (src/cli/typing.rs).
    /// No while anyone else holds it (the shell, after `bg`).
    pub(crate) fn status_may_draw(&self) -> bool {
        // SAFETY: tcgetpgrp only reads the terminal's state.
        let fg = unsafe { libc::tcgetpgrp(TTY) };
        if fg == self.ours {
            return true;
        }
        if fg <= 0 || !canonical() {
            return false;
        }
        self.foreground_input(fg) == Some(false)
    }

    /// Whether the command is held for what the user types on the
    /// terminal (one look), while a group of its own (not stallwarden's) holds the
    /// terminal (R8.13; the rule is src/cli/input_wait.rs's, stricter than
    /// the status line's: a pause hides a silence).
    pub(crate) fn foreground_waits_for_input(&self) -> super::input_wait::Look {
        use super::input_wait::{look, Look};
        // SAFETY: tcgetpgrp only reads the terminal's state.
        let fg = unsafe { libc::tcgetpgrp(TTY) };
        match device() {
            Some(tty) if fg != self.ours && fg > 0 => look(fg as u32, tty),
            _ => Look::Busy,
        }
    }

    /// Whether a process of group `fg` waits for input from the terminal;
    /// `None` when that cannot be told (no device, no such group).
    fn foreground_input(&self, fg: libc::pid_t) -> Option<bool> {
        let tty = device()?;
        let group: Vec<u32> = super::reaper::our_tree(None)
            .into_iter()
            .filter(|p| i64::from(p.pgid) == i64::from(fg))
            .map(|p| p.pid)
            .collect();
        (!group.is_empty()).then(|| {
            group
                .iter()
                .any(|&pid| super::typing::waits_on_terminal(pid, tty))
        })
    }
}

/// Whether the terminal is in canonical (line-by-line) mode: not raw.
fn canonical() -> bool {
    // SAFETY: `t` is a valid place for tcgetattr to write.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        libc::tcgetattr(TTY, &mut t) == 0 && t.c_lflag & libc::ICANON != 0
    }
}

/// The terminal's device number.
fn device() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    stallwarden::sys::own_fd_metadata(0).ok().map(|m| m.rdev())
}

/// Blocks SIGTTOU for the calling thread.
fn block_ttou() {
    // SAFETY: the set is initialised by sigemptyset before use.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, std::ptr::null_mut());
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = give(self.ours);
    }
}

/// Whether stdin is a terminal whose foreground process group is ours.
fn in_foreground() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp only read process state.
    unsafe { libc::isatty(TTY) == 1 && libc::tcgetpgrp(TTY) == libc::getpgrp() }
}

/// Makes `pgid` the terminal's foreground group. SIGTTOU is blocked (for
/// this thread) around the call: a process outside the foreground group may then set it
/// (POSIX `tcsetpgrp`) instead of being stopped.
fn give(pgid: libc::pid_t) -> io::Result<()> {
    // SAFETY: the sets are initialised by sigemptyset before use; the
    // calls are async-signal-safe (this also runs in a forked child).
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        let rc = libc::tcsetpgrp(TTY, pgid);
        let err = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if rc == 0 {
            Ok(())
        } else {
            Err(err)
        }
    }
}
