//! The `stallwarden` binary's subcommands (SPEC §8). The library describes;
//! this module renders and picks exit statuses.

pub(crate) mod aftermath;
pub(crate) mod args;
pub(crate) mod check;
pub(crate) mod console;
pub(crate) mod control;
#[cfg(test)]
mod doors;
pub(crate) mod exec;
pub(crate) mod hook;
pub(crate) mod input_wait;
pub(crate) mod inputs;
pub(crate) mod jobs;
pub(crate) mod leaks;
pub(crate) mod logging;
pub(crate) mod loud;
pub(crate) mod outputs;
pub(crate) mod pty;
pub(crate) mod pumps;
pub(crate) mod reaper;
pub(crate) mod refused;
pub(crate) mod report;
pub(crate) mod restart;
pub(crate) mod run;
pub(crate) mod signals;
pub(crate) mod stream;
pub(crate) mod terminal;
pub(crate) mod typing;

/// 124: stallwarden stopped the command, as GNU `timeout` (R8.2).
pub(crate) const EXIT_STOPPED: u8 = 124;
/// 125: stallwarden's own error; the command did not run (R8.2).
pub(crate) const EXIT_ERROR: u8 = 125;
/// 126: the command was found but could not be executed (R8.2).
pub(crate) const EXIT_NOT_EXECUTABLE: u8 = 126;
/// 127: the command was not found (R8.2).
pub(crate) const EXIT_NOT_FOUND: u8 = 127;

/// 1: the command exited 0 but some of its output could not be written
/// (ENOSPC, EIO): as GNU tools exit 1 on a write error (R8.10).
pub(crate) const EXIT_OUTPUT_LOST: u8 = 1;

/// The hidden variable that makes a thread "unavailable" after the
/// command started, so tests can check that stallwarden then fails closed
/// (R8.9): a comma-separated list of `pump`, `waiter`; `slow-waiter` makes
/// the waiter look for the exit 3 s late, so a test can send a signal
/// between the exit and the news of it. Not documented for users; the
/// command never sees it. Read only in a build with debug assertions (the
/// one the tests drive): a release binary ignores it (R8.16).
pub(crate) const FAIL_VAR: &str = "STALLWARDEN_TEST_FAIL";

/// Whether [`FAIL_VAR`] names `point`; always false in a release build.
pub(crate) fn failpoint(point: &str) -> bool {
    cfg!(debug_assertions)
        && std::env::var(FAIL_VAR).is_ok_and(|v| v.split(',').any(|p| p.trim() == point))
}
