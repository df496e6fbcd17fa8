//! What the sources, the sinks and the CLI share of the operating system
//! (R10.6): the one `/proc/[pid]/stat` parser, the one way to make an
//! owner-only directory, and the one way to wait for another process's end. They live in the core because it is the one
//! crate all three depend on.

mod exit_wait;
mod private_dir;
mod proc_stat;

pub use exit_wait::wait_exit;
pub use private_dir::{private_dir, PrivateDirError};
pub use proc_stat::{state_from_code, ProcStat, StatError};
