//! Parsing `/proc/[pid]/stat` lines and `/proc/stat`'s boot time (R5.5).

use std::ffi::CStr;
use std::path::Path;

use watchdog_core::ProcState;

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
/// use stallguard_sources::procs::ProcStat;
/// use watchdog_core::ProcState;
///
/// // The command name may hold spaces and parentheses: it ends at the last `)`.
/// let line = b"4242 (my (odd) job) D 4200 4242 4200 0 -1 4194560 0 0 0 0 30 12 0 0 20 0 1 0 98765 0 0";
/// let stat = ProcStat::parse(line).unwrap();
/// assert_eq!((stat.pid, stat.comm.as_str(), stat.ppid), (4242, "my (odd) job", 4200));
/// assert_eq!(stat.state, ProcState::DiskWait);
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
    /// Field 4: parent process id.
    pub ppid: u32,
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
        let open = memchr::memchr(b'(', line).ok_or(StatError::NoCommand)?;
        // The name is arbitrary bytes: only the last `)` can end it.
        let close = memchr::memrchr(b')', line).ok_or(StatError::NoCommand)?;
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
        let state = match next("state", 3)? {
            [c] => state_from_code(*c),
            other => return Err(invalid("state", 3, other)),
        };
        let ppid = number(next("ppid", 4)?, "ppid", 4)?;
        let utime = number(next("utime", 14)?, "utime", 14)?;
        let stime = number(next("stime", 15)?, "stime", 15)?;
        let cutime = number(next("cutime", 16)?, "cutime", 16)?;
        let cstime = number(next("cstime", 17)?, "cstime", 17)?;
        let starttime = number(next("starttime", 22)?, "starttime", 22)?;
        Ok(ProcStat {
            pid,
            comm,
            state,
            ppid: u32::try_from(ppid)
                .map_err(|_| invalid("ppid", 4, ppid.to_string().as_bytes()))?,
            utime,
            stime,
            cutime,
            cstime,
            starttime,
        })
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

/// Maps a proc(5) state letter to the state the guard reports.
///
/// # Examples
///
/// ```
/// use stallguard_sources::procs::state_from_code;
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
/// use stallguard_sources::procs::parse_btime;
/// assert_eq!(parse_btime("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), Some(1_700_000_000));
/// assert_eq!(parse_btime("cpu 1 2 3\n"), None);
/// ```
pub fn parse_btime(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Writes `{pid}{suffix}\0` into `buf` without allocating.
pub(super) fn stat_path<'a>(buf: &'a mut [u8; 24], pid: u32, suffix: &[u8]) -> &'a CStr {
    let mut digits = [0u8; 10];
    let mut n = pid;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = &digits[i..];
    let end = digits.len() + suffix.len();
    buf[..digits.len()].copy_from_slice(digits);
    buf[digits.len()..end].copy_from_slice(suffix);
    buf[end] = 0;
    CStr::from_bytes_with_nul(&buf[..=end]).expect("one NUL, at the end")
}

pub(super) fn read_btime_ms(root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(root.join("stat")).ok()?;
    parse_btime(&text).map(|s| s.saturating_mul(1000))
}

pub(super) fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|&t| t > 0).unwrap_or(100)
}
