//! What `run` checks and opens before the command starts (R8.12, R5.10):
//! the budget flags that override the config, the execution budget an
//! agent stream gets when none was set, the control socket's path length
//! and the `--events` file, opened to append so runs can share it.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stallwarden::sinks::jsonl::JsonLinesSink;
use stallwarden::{Profile, Sink};

use super::args::RunArgs;

/// R5.10: the execution budget `--stream FORMAT` gets when no flag or config
/// key sets one: an agent's own tool (a build, a test run) may be silent
/// this long.
pub(crate) const STREAM_EXECUTION: Duration = Duration::from_secs(30 * 60);

/// The longest Unix socket path the kernel binds, without its NUL:
/// `sun_path` is 108 bytes on Linux.
pub(crate) const SOCKET_PATH_MAX: usize = 107;

/// Overrides `profile` with the budget flags given (R8.1): `--idle`,
/// `--deadline`, `--execution`, `--startup`, `--liveness`, `--heartbeat`,
/// `--terminate-after`, `--grace`.
pub(crate) fn apply_flags(args: &RunArgs, profile: &mut Profile) {
    // R10.6: each flag holds a value the core's one entry parsed.
    let flags = [
        &args.idle,
        &args.deadline,
        &args.execution,
        &args.startup,
        &args.liveness,
        &args.heartbeat,
        &args.terminate_after,
        &args.grace,
    ];
    for setting in flags.into_iter().flatten() {
        profile.apply(setting);
    }
}

/// Returns the flag that sets a profile key, for range errors.
pub(crate) fn flag_of(key: &str) -> &str {
    match key {
        "idle" => "--idle",
        "deadline" => "--deadline",
        "execution" => "--execution",
        "startup" => "--startup",
        "liveness" => "--liveness",
        "heartbeat-interval" => "--heartbeat",
        "terminate-after" => "--terminate-after",
        "grace-period" => "--grace",
        other => other,
    }
}

/// R5.10: with an agent stream, no `--execution` flag and no execution
/// budget in the config (absent or `"off"`, the shipped default, so a copy
/// of `stallwarden.default.toml` keeps it), the execution budget is
/// [`STREAM_EXECUTION`]. `--execution off` keeps it off. Returns whether
/// the default was applied.
pub(crate) fn stream_default(profile: &mut Profile, streaming: bool, flag_set: bool) -> bool {
    if !streaming || flag_set || profile.execution.is_some() {
        return false;
    }
    profile.execution = Some(STREAM_EXECUTION);
    true
}

/// R8.12: a control socket path the kernel cannot bind whole is refused
/// before the start, with the limit (a longer one would be cut, and no
/// client could connect).
pub(crate) fn check_socket(path: &Path) -> Result<(), String> {
    let len = path.as_os_str().as_bytes().len();
    if len > SOCKET_PATH_MAX {
        return Err(format!(
            "--socket {}: the path is {len} bytes, longer than the {SOCKET_PATH_MAX} a Unix \
             socket can have (108 with the NUL); use a shorter path",
            path.display()
        ));
    }
    Ok(())
}

/// Opens `--events PATH` (R8.12): created if missing, appended to, never
/// truncated, and written one whole line per `write(2)`, so several runs
/// can share one file. A FIFO with no reader yet never blocks the start:
/// it is opened on the events sink's own thread at the first event, which
/// waits there for a reader (the exit then waits for it at most as long as
/// for any slow sink, and says so).
pub(crate) fn open_events(path: &str) -> Result<Box<dyn Sink>, String> {
    let name = format!("jsonl:{path}");
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    let writer = match file {
        Ok(f) => {
            set_blocking(&f).map_err(|e| format!("--events {path}: {e}"))?;
            EventsFile::Open(f)
        }
        // O_WRONLY|O_NONBLOCK on a FIFO with no reader.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            tracing::info!(
                path,
                "events FIFO has no reader yet: waiting for one off the run's path"
            );
            EventsFile::Pending(PathBuf::from(path))
        }
        Err(e) => return Err(format!("--events: cannot open events file {path}: {e}")),
    };
    Ok(Box::new(JsonLinesSink::named(writer, name)))
}

/// Clears `O_NONBLOCK`: the file was opened without blocking only so that
/// a FIFO's open returns at once.
fn set_blocking(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The events file: unbuffered, so each line the sink writes with one
/// `write_all` is one `write(2)` on an `O_APPEND` file, never torn by
/// another run's line; or a FIFO to open once a reader comes.
#[derive(Debug)]
enum EventsFile {
    Open(File),
    Pending(PathBuf),
}

impl Write for EventsFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let EventsFile::Pending(path) = self {
            // On the isolated sink's thread: blocks until a reader opens it.
            let f = std::fs::OpenOptions::new().append(true).open(&*path)?;
            *self = EventsFile::Open(f);
        }
        match self {
            EventsFile::Open(f) => whole_line(f, buf),
            EventsFile::Pending(_) => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes all of `line` or, as far as stallwarden can tell, none of it
/// (R8.16): a regular file that takes only part of it (a nearly full
/// disk, a file-size limit) is cut back to where the line began, so the
/// next append never glues onto half a line. The cut is made only while
/// the file still ends where the part ended: another run's line appended
/// meanwhile is never touched. Returns the error that stopped the line.
fn whole_line(f: &mut File, line: &[u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < line.len() {
        match f.write(&line[done..]) {
            Ok(0) => {
                cut_back(f, done);
                return Err(io::ErrorKind::WriteZero.into());
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                cut_back(f, done);
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// Removes the last `written` bytes of `f` if they are still its end.
fn cut_back(f: &mut File, written: usize) {
    use std::io::Seek;
    if written == 0 {
        return;
    }
    let Ok(meta) = f.metadata() else { return };
    if !meta.is_file() {
        // A FIFO's bytes are gone to its reader.
        return;
    }
    // With O_APPEND the offset is where our last write ended.
    let Ok(end) = f.stream_position() else { return };
    if meta.len() == end {
        let _ = f.set_len(end.saturating_sub(written as u64));
    }
}
