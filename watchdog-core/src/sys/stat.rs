//! `PID/stat` and the other small per-process files (`comm`, `exe`), with
//! the table's own `stat` (boot time) and `uptime` (R5.5, R10.6, R10.7).
//!
//! [`ProcStat::parse`] is the one parser of `/proc/[pid]/stat` lines: the
//! process sampler (sources), the process sink's group lookup (sinks) and
//! the CLI's reaper all read the kernel's process table through it. The
//! command name (field 2) is arbitrary bytes, spaces and parentheses
//! included, so it ends at the line's last `)`. The readers return `None`
//! for a process that is gone (or a line that does not parse): a table
//! changes while it is read.

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use crate::ProcState;

/// Why a `/proc/[pid]/stat` line could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatError {
    /// No `(` … `)` around the command name.
    #[error("stat line has no command name in parentheses")]
    NoCommand,
    /// The pid before the command name is not a number.
    #[error("stat line does not start with a pid")]
    BadPid,
    /// The line ends before field `name` (1-based position `field`).
    #[error("stat line ends before field {field} ({name})")]
    Missing {
        /// The field's name in proc(5).
        name: &'static str,
        /// Its 1-based position in proc(5).
        field: usize,
    },
    /// Field `name` is not what proc(5) says it holds.
    #[error("stat field {field} ({name}) is not valid: `{value}`")]
    Invalid {
        /// The field's name in proc(5).
        name: &'static str,
        /// Its 1-based position in proc(5).
        field: usize,
        /// What was there (cut to 32 bytes).
        value: String,
    },
}

/// The fields of one `/proc/[pid]/stat` line that sampling uses.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::ProcStat;
/// use watchdog_core::ProcState;
///
/// // The command name may hold spaces and parentheses: it ends at the last `)`.
/// let line = b"4242 (my (odd) job) D 4200 4242 4200 0 -1 4194560 0 0 0 0 30 12 0 0 20 0 1 0 98765 0 0";
/// let stat = ProcStat::parse(line).unwrap();
/// assert_eq!((stat.pid, stat.comm.as_str(), stat.ppid, stat.pgrp), (4242, "my (odd) job", 4200, 4242));
/// assert_eq!((stat.state, stat.state_code), (ProcState::DiskWait, b'D'));
/// assert!(!stat.is_dead());
/// assert_eq!((stat.utime, stat.stime, stat.starttime), (30, 12, 98765));
///
/// assert!(ProcStat::parse(b"4242 (trunc").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 1: process id.
    pub pid: u32,
    /// Field 2: executable name, at most 15 bytes as the kernel keeps it.
    pub comm: String,
    /// Field 3: scheduler state.
    pub state: ProcState,
    /// Field 3 as the kernel wrote it: `R`, `S`, `D`, `Z`, `X`, …
    pub state_code: u8,
    /// Field 4: parent process id.
    pub ppid: u32,
    /// Field 5: process group id.
    pub pgrp: u32,
    /// Field 14: user CPU time, clock ticks.
    pub utime: u64,
    /// Field 15: system CPU time, clock ticks.
    pub stime: u64,
    /// Field 16: user CPU time of its waited-for children, clock ticks.
    pub cutime: u64,
    /// Field 17: system CPU time of its waited-for children, clock ticks.
    pub cstime: u64,
    /// Field 22: start time after boot, clock ticks.
    pub starttime: u64,
}

impl ProcStat {
    /// Parses one `/proc/[pid]/stat` line; bad input is an error naming the
    /// field, never a panic.
    pub fn parse(line: &[u8]) -> Result<ProcStat, StatError> {
        let open = line
            .iter()
            .position(|&b| b == b'(')
            .ok_or(StatError::NoCommand)?;
        // The name is arbitrary bytes: only the last `)` can end it.
        let close = line
            .iter()
            .rposition(|&b| b == b')')
            .ok_or(StatError::NoCommand)?;
        if close < open {
            return Err(StatError::NoCommand);
        }
        let pid = std::str::from_utf8(&line[..open])
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .ok_or(StatError::BadPid)?;
        let comm = String::from_utf8_lossy(&line[open + 1..close]).into_owned();
        // Fields after the name, numbered from 3 as in proc(5).
        let mut fields = line[close + 1..]
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let mut at = 2;
        let mut next = |name: &'static str, field: usize| -> Result<&[u8], StatError> {
            for f in fields.by_ref() {
                at += 1;
                if at == field {
                    return Ok(f);
                }
            }
            Err(StatError::Missing { name, field })
        };
        let state_code = match next("state", 3)? {
            [c] => *c,
            other => return Err(invalid("state", 3, other)),
        };
        let ppid = pid_field(next("ppid", 4)?, "ppid", 4)?;
        let pgrp = pid_field(next("pgrp", 5)?, "pgrp", 5)?;
        let utime = number(next("utime", 14)?, "utime", 14)?;
        let stime = number(next("stime", 15)?, "stime", 15)?;
        let cutime = number(next("cutime", 16)?, "cutime", 16)?;
        let cstime = number(next("cstime", 17)?, "cstime", 17)?;
        let starttime = number(next("starttime", 22)?, "starttime", 22)?;
        Ok(ProcStat {
            pid,
            comm,
            state: state_from_code(state_code),
            state_code,
            ppid,
            pgrp,
            utime,
            stime,
            cutime,
            cstime,
            starttime,
        })
    }

    /// Returns true for a process that no longer runs: a zombie (`Z`) or
    /// dead (`X`).
    pub fn is_dead(&self) -> bool {
        matches!(self.state_code, b'Z' | b'X')
    }
}

fn invalid(name: &'static str, field: usize, value: &[u8]) -> StatError {
    let cut = &value[..value.len().min(32)];
    StatError::Invalid {
        name,
        field,
        value: String::from_utf8_lossy(cut).into_owned(),
    }
}

fn number(text: &[u8], name: &'static str, field: usize) -> Result<u64, StatError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| invalid(name, field, text))
}

/// A pid field (`ppid`, `pgrp`): a number that fits a pid.
fn pid_field(text: &[u8], name: &'static str, field: usize) -> Result<u32, StatError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| invalid(name, field, text))
}

/// Maps a proc(5) state letter to the state the guard reports.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::state_from_code;
/// use watchdog_core::ProcState;
/// assert_eq!(state_from_code(b'D'), ProcState::DiskWait);
/// assert_eq!(state_from_code(b'I'), ProcState::Other);
/// ```
pub fn state_from_code(code: u8) -> ProcState {
    match code {
        b'R' => ProcState::Running,
        b'S' => ProcState::Sleeping,
        b'D' => ProcState::DiskWait,
        b'Z' => ProcState::Zombie,
        b'T' | b't' => ProcState::Stopped,
        _ => ProcState::Other,
    }
}

/// Parses the `btime` (boot time, Unix seconds) line of `/proc/stat`.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::parse_btime;
/// assert_eq!(parse_btime("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), Some(1_700_000_000));
/// assert_eq!(parse_btime("cpu 1 2 3\n"), None);
/// ```
pub fn parse_btime(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Returns the boot time in Unix milliseconds, from `root/stat`; `None`
/// when it cannot be read.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{btime_ms, proc_root};
/// # #[cfg(target_os = "linux")]
/// assert!(btime_ms(proc_root()).unwrap() > 1_000_000_000_000);
/// ```
pub fn btime_ms(root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(root.join("stat")).ok()?;
    parse_btime(&text).map(|s| s.saturating_mul(1000))
}

/// Returns the clock ticks per second that `stat`'s CPU and start times
/// count in (`sysconf(_SC_CLK_TCK)`, 100 where it says nothing usable).
///
/// # Examples
///
/// ```
/// assert!(watchdog_core::sys::ticks_per_second() > 0);
/// ```
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t)
        .ok()
        .and_then(NonZeroU64::new)
        .map_or(100, NonZeroU64::get)
}

/// Reads and parses `root/PID/stat`; `None` when the process is gone or
/// its line does not parse.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, read_stat};
/// # #[cfg(target_os = "linux")] {
/// let me = std::process::id();
/// assert_eq!(read_stat(proc_root(), me).unwrap().pid, me);
/// # }
/// ```
pub fn read_stat(root: &Path, pid: u32) -> Option<ProcStat> {
    let line = std::fs::read(root.join(format!("{pid}/stat"))).ok()?;
    ProcStat::parse(&line).ok()
}

/// Reads `root/PID/comm`, the executable's name (at most 15 bytes), without
/// its newline; `None` when the process is gone.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{comm, proc_root};
/// # #[cfg(target_os = "linux")]
/// assert!(!comm(proc_root(), std::process::id()).unwrap().ends_with('\n'));
/// ```
pub fn comm(root: &Path, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(root.join(format!("{pid}/comm"))).ok()?;
    Some(text.trim_end_matches('\n').to_owned())
}

/// Reads the `root/PID/exe` link, the path of the executable the process
/// runs; `None` when it is gone or not ours to look at.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{exe, proc_root};
/// # #[cfg(target_os = "linux")]
/// assert_eq!(exe(proc_root(), std::process::id()), std::env::current_exe().ok());
/// ```
pub fn exe(root: &Path, pid: u32) -> Option<PathBuf> {
    std::fs::read_link(root.join(format!("{pid}/exe"))).ok()
}

/// Reads the seconds since boot from `root/uptime` (its first field).
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, uptime};
/// # #[cfg(target_os = "linux")]
/// assert!(uptime(proc_root()).unwrap() > 0.0);
/// ```
pub fn uptime(root: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(root.join("uptime")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full line, as the kernel writes it, for `comm`.
    fn line(comm: &str, state: char) -> String {
        format!("42 ({comm}) {state} 7 40 40 0 -1 4194560 0 0 0 0 3 4 5 6 20 0 1 0 900 0 0 0")
    }

    #[test]
    fn a_hostile_name_ends_at_the_last_paren() {
        // A name made to look like the end of the name and more fields.
        let s = ProcStat::parse(line("a) b (c", 'S').as_bytes()).unwrap();
        assert_eq!(s.comm, "a) b (c");
        assert_eq!((s.pid, s.ppid, s.pgrp), (42, 7, 40));
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (3, 4, 5, 6));
        assert_eq!(s.starttime, 900);
        let s = ProcStat::parse(line(") Z 1 1 (", 'R').as_bytes()).unwrap();
        assert_eq!(
            (s.comm.as_str(), s.state, s.pgrp),
            (") Z 1 1 (", ProcState::Running, 40)
        );
        assert!(!s.is_dead());
        let s = ProcStat::parse(line("x", 'X').as_bytes()).unwrap();
        assert!(s.is_dead());
        assert_eq!(s.state, ProcState::Other);
    }

    #[test]
    fn bad_lines_are_errors_naming_the_field() {
        assert_eq!(ProcStat::parse(b"42 (trunc"), Err(StatError::NoCommand));
        assert_eq!(ProcStat::parse(b"x (y) S 1 2"), Err(StatError::BadPid));
        assert_eq!(
            ProcStat::parse(b"42 (y) S 1"),
            Err(StatError::Missing {
                name: "pgrp",
                field: 5
            })
        );
        let e = ProcStat::parse(b"42 (y) S 1 99999999999 0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "stat field 5 (pgrp) is not valid: `99999999999`"
        );
        assert!(ProcStat::parse(b"").is_err());
        assert!(ProcStat::parse(b") 42 (").is_err());
    }

    #[test]
    fn fixture_files_are_read_and_a_missing_process_is_none() {
        let dir = std::env::temp_dir().join(format!("sys-stat-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("42")).unwrap();
        std::fs::write(dir.join("stat"), "cpu 1 2\nbtime 1700000000\n").unwrap();
        std::fs::write(dir.join("uptime"), "123.45 67.0\n").unwrap();
        std::fs::write(dir.join("42/stat"), line("a b", 'S')).unwrap();
        std::fs::write(dir.join("42/comm"), "a b\n").unwrap();
        assert_eq!(btime_ms(&dir), Some(1_700_000_000_000));
        assert_eq!(uptime(&dir), Some(123.45));
        assert_eq!(read_stat(&dir, 42).unwrap().comm, "a b");
        assert_eq!(comm(&dir, 42).as_deref(), Some("a b"));
        assert_eq!(
            (read_stat(&dir, 43), comm(&dir, 43), exe(&dir, 42)),
            (None, None, None)
        );
        std::fs::write(dir.join("42/stat"), "42 (trunc").unwrap();
        assert_eq!(read_stat(&dir, 42), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // R5.5: CPU and start times count in the kernel's clock ticks, as
    // many per second as `sysconf(_SC_CLK_TCK)` says (USER_HZ, 100 on
    // Linux): a sample's CPU milliseconds are ticks * 1000 / this.
    #[test]
    fn cpu_times_count_in_the_kernels_clock_ticks() {
        // SAFETY: sysconf has no preconditions.
        let said = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        assert_eq!(ticks_per_second(), u64::try_from(said).unwrap());
        #[cfg(target_os = "linux")]
        assert_eq!(ticks_per_second(), 100);
    }

    // R8.13: a process's executable is the target of its `exe` link,
    // read as it is (not followed).
    #[test]
    fn the_executable_is_the_exe_links_target() {
        let dir = std::env::temp_dir().join(format!("sys-exe-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("42")).unwrap();
        std::os::unix::fs::symlink("/opt/app/bin/worker", dir.join("42/exe")).unwrap();
        let got = (exe(&dir, 42), exe(&dir, 43));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got, (Some(PathBuf::from("/opt/app/bin/worker")), None));
    }
}
