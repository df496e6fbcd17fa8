//! `/proc/stat`'s boot time and `/proc/[pid]/stat` (R5.5): read and parsed
//! by the core's one owner of the process table
//! ([`watchdog_core::sys`], R10.7), re-exported here where they always
//! were.

pub use watchdog_core::sys::{parse_btime, state_from_code, ProcStat, StatError};
