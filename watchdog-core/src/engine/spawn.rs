//! Starting the threads a guard needs: the driver on a real clock, one
//! per isolated sink. A thread that cannot start is an error to the
//! caller, never a guard that silently judges nothing or a sink queue that
//! grows forever (R10.5).

use std::io;

use crate::vocab::error::GuardError;

/// Called with a thread's name before the guard starts it; an error stands
/// for the spawn's own (see [`GuardBuilder::spawn_gate`]).
pub(crate) type SpawnGate = fn(&str) -> io::Result<()>;

/// Starts a thread named `name` with `spawn`, after asking `gate`; either
/// one's error becomes [`GuardError::Thread`].
pub(crate) fn spawn_checked<T>(
    gate: Option<SpawnGate>,
    name: &str,
    spawn: impl FnOnce() -> io::Result<T>,
) -> Result<T, GuardError> {
    gate.map_or(Ok(()), |gate| gate(name))
        .and_then(|()| spawn())
        .map_err(|e| GuardError::Thread {
            thread: name.to_owned(),
            reason: e.to_string(),
        })
}
