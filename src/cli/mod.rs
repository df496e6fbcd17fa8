//! The `stallguard` binary's subcommands (SPEC §8). The library describes;
//! this module renders and picks exit statuses.

pub(crate) mod aftermath;
pub(crate) mod args;
pub(crate) mod check;
pub(crate) mod console;
pub(crate) mod control;
pub(crate) mod exec;
pub(crate) mod inputs;
pub(crate) mod jobs;
pub(crate) mod leaks;
pub(crate) mod logging;
pub(crate) mod loud;
pub(crate) mod reaper;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod stream;
pub(crate) mod terminal;
pub(crate) mod typing;

/// 124: stallguard stopped the command, as GNU `timeout` (R8.2).
pub(crate) const EXIT_STOPPED: u8 = 124;
/// 125: stallguard's own error; the command did not run (R8.2).
pub(crate) const EXIT_ERROR: u8 = 125;
/// 126: the command was found but could not be executed (R8.2).
pub(crate) const EXIT_NOT_EXECUTABLE: u8 = 126;
/// 127: the command was not found (R8.2).
pub(crate) const EXIT_NOT_FOUND: u8 = 127;
