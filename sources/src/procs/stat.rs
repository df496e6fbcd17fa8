//! `/proc/stat`'s boot time and the paths of `/proc/[pid]/stat` (R5.5);
//! the stat line itself is parsed by the core's one parser
//! ([`watchdog_core::sys::ProcStat`], R10.6).

use std::ffi::CStr;
use std::num::NonZeroU64;
use std::path::Path;

pub use watchdog_core::sys::{state_from_code, ProcStat, StatError};

/// Parses the `btime` (boot time, Unix seconds) line of `/proc/stat`.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::parse_btime;
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
    u64::try_from(t)
        .ok()
        .and_then(NonZeroU64::new)
        .map_or(100, NonZeroU64::get)
}
