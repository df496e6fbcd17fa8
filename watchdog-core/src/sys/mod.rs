//! What the sources, the sinks and the CLI share of the operating system
//! (R10.6): the one `/proc/[pid]/stat` parser and the one way to make an
//! owner-only directory. They live in the core because it is the one
//! crate all three depend on.

mod private_dir;
mod proc_stat;

pub use private_dir::{private_dir, PrivateDirError};
pub use proc_stat::{state_from_code, ProcStat, StatError};
