//! Signals sent to stallwarden (R8.9): every catchable signal that ends a
//! process by default is caught before the command starts and forwarded to
//! the command's process group, followed by SIGCONT, as GNU `timeout` does;
//! stallwarden never dies of one while the command runs.
//!
//! The list follows coreutils' `timeout` (`src/term-sig.h`, 9.10 and
//! later): SIGALRM, SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGUSR1, SIGUSR2, the
//! resource and timer signals, SIGPWR, SIGSTKFLT and the real-time signals.
//! Differences, on purpose:
//! - SIGPIPE and SIGXFSZ are not caught: stallwarden's own writes raise them
//!   (a reader gone, a file size limit), and a write error is handled per
//!   stream instead (R8.10, src/cli/pumps.rs), never as a signal to the
//!   whole group. Both are ignored in stallwarden itself (SIGPIPE by Rust's
//!   runtime, SIGXFSZ by [`ignore_file_size_signal`]), so such a write
//!   fails with EPIPE or EFBIG instead of killing the watchdog (R8.16);
//!   the command gets them back at their default before its exec.
//! - The fault signals (SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV,
//!   SIGSYS) are left alone: they mean stallwarden itself faulted.
//! - As `timeout` does since 9.9, a signal ignored when stallwarden starts
//!   (SIGINT and SIGQUIT in a shell's background job) stays ignored, SIGTERM
//!   and SIGALRM aside.
//!
//! Delivery goes through tokio's signal driver into one channel, so the run
//! loop and the aftermath (R8.5, R8.6) wait on it alike.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// The signals forwarded by name; the real-time ones are added at run time.
const NAMED: &[i32] = &[
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGXCPU,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSTKFLT,
];

/// The signals stallwarden catches and forwards, in order.
pub(crate) fn forwarded() -> Vec<i32> {
    let mut all = NAMED.to_vec();
    all.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    all
}

/// Signals received by stallwarden, in arrival order.
pub(crate) struct Incoming {
    rx: UnboundedReceiver<i32>,
}

impl Incoming {
    /// Catches every forwarded signal not ignored at start (SIGTERM and
    /// SIGALRM always); each arrival is queued for [`Incoming::recv`].
    /// The runtime must be current: call inside `Runtime::enter` or
    /// `block_on`.
    pub(crate) fn catch() -> io::Result<Incoming> {
        let (tx, rx) = unbounded_channel();
        for sig in forwarded() {
            if ignored_at_start(sig) && sig != libc::SIGTERM && sig != libc::SIGALRM {
                continue;
            }
            let mut stream =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(sig))?;
            let tx = tx.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    if tx.send(sig).is_err() {
                        return;
                    }
                }
            });
        }
        Ok(Incoming { rx })
    }

    /// The next signal received.
    pub(crate) async fn recv(&mut self) -> i32 {
        match self.rx.recv().await {
            Some(sig) => sig,
            // Every sender gone: no signal will come.
            None => std::future::pending().await,
        }
    }
}

/// Whether SIGXFSZ was already ignored when stallwarden started: then the
/// command inherits the ignore, as it would without stallwarden.
static XFSZ_IGNORED_AT_START: AtomicBool = AtomicBool::new(false);

/// Ignores SIGXFSZ in stallwarden (R8.16): a file-size limit (`ulimit -f`)
/// on its stdout, stderr or `--events` file makes the write fail with
/// EFBIG, a failing output said once (R8.10), instead of killing
/// stallwarden and leaving the command unwatched. Call before any write;
/// [`command_defaults`] gives the command the disposition stallwarden
/// started with.
pub(crate) fn ignore_file_size_signal() {
    XFSZ_IGNORED_AT_START.store(ignored_at_start(libc::SIGXFSZ), Ordering::SeqCst);
    // SAFETY: installing SIG_IGN has no memory preconditions.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Makes `command` start with SIGXFSZ at its default again (unless it was
/// ignored when stallwarden started): an ignored signal stays ignored
/// across exec, and the command must die of its own file-size limit as it
/// would without stallwarden.
pub(crate) fn command_defaults(command: &mut Command) {
    if XFSZ_IGNORED_AT_START.load(Ordering::SeqCst) {
        return;
    }
    // SAFETY: between fork and exec the closure only calls signal(2),
    // which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// Whether `sig` is ignored (`SIG_IGN`) in this process now.
fn ignored_at_start(sig: i32) -> bool {
    // SAFETY: a null new action only reads the current one into `old`,
    // a plain C struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Forwards signal `sig` to the command's process group, then continues
/// the group, so a stopped command (Ctrl-Z, `kill -STOP`) still acts on it
/// (R8.9), as GNU `timeout` does.
pub(crate) fn forward(pgid: u32, sig: i32) {
    let Ok(raw) = i32::try_from(pgid) else { return };
    if raw <= 1 {
        return;
    }
    let group = Pid::from_raw(raw);
    match Signal::try_from(sig) {
        Ok(s) => {
            let _ = killpg(group, s);
        }
        // Real-time signals have no `Signal` value.
        // SAFETY: killpg has no memory preconditions.
        Err(_) => unsafe {
            libc::killpg(raw, sig);
        },
    }
    if sig != libc::SIGKILL && sig != libc::SIGCONT {
        let _ = killpg(group, Signal::SIGCONT);
    }
    tracing::info!(signal = sig, pgid, "forwarded a signal to the command");
}

/// Ends stallwarden with signal `sig`, as GNU `timeout` does when the
/// command died of it (R8.16): a parent that checks `WIFSIGNALED` sees
/// the death, not an exit with 128+N. No core file of stallwarden's own
/// (the command's was its own), the default action restored, the signal
/// unblocked, then raised. Returns only if `sig` did not end the process
/// (its default is to ignore or to stop): the caller then exits 128+N.
pub(crate) fn die_of(sig: i32) {
    // SAFETY: plain syscalls on this process with valid arguments; a
    // zeroed sigset is filled by sigemptyset before use.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// The conventional name of `sig` (`SIGHUP`), or `signal N`.
pub(crate) fn name(sig: i32) -> String {
    Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_the_terminating_signals_and_not_the_ones_our_writes_raise() {
        let all = forwarded();
        for s in [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGTERM,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGALRM,
            libc::SIGRTMIN(),
            libc::SIGRTMAX(),
        ] {
            assert!(all.contains(&s), "{s} missing");
        }
        for s in [libc::SIGPIPE, libc::SIGXFSZ, libc::SIGSEGV, libc::SIGCHLD] {
            assert!(!all.contains(&s), "{s} must not be caught");
        }
        assert_eq!(name(libc::SIGHUP), "SIGHUP");
    }
}
