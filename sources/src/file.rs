//! File-growth polling (R5.7).
//!
//! [`FileGrowth`] stats one file (a transcript, a log) and records growth
//! as an `output` signal. It reads metadata only, never the content, so it
//! counts bytes but not lines. Following a file's content (a tail) is not
//! done here; wrap a reader in [`crate::output::CountingReader`] for that.
//!
//! Rules:
//! - Content present at the first poll is the baseline, not progress.
//! - A file that does not exist yet has length 0: when it appears, all of
//!   its bytes are new.
//! - A file that shrank (truncated, as `> log` does) or was replaced (a
//!   different inode, as log rotation does) starts over from 0: its whole
//!   current length is new content.
//! - A file that disappears goes back to "does not exist yet".

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use watchdog_core::Recorder;

/// Why a poll could not stat the file.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::file::FileError;
/// let e = FileError::NotAFile("/tmp".into());
/// assert_eq!(e.to_string(), "`/tmp` is not a regular file");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path exists but is a directory or another non-file.
    #[error("`{}` is not a regular file", .0.display())]
    NotAFile(PathBuf),
    /// The file could not be stat'ed (permissions, I/O).
    #[error("cannot stat `{}`: {source}", path.display())]
    Stat {
        /// The path polled.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A zero polling interval.
    #[error("file polling interval must be at least 1ms")]
    ZeroInterval,
}

/// What one poll saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The first poll: the current length is the baseline.
    Baseline(u64),
    /// The file does not exist (yet, or any more).
    Missing,
    /// Same length as last time.
    Unchanged,
    /// New bytes since the last poll; recorded as output.
    Grew(u64),
    /// Shrank or was replaced: this many bytes now, all recorded as new.
    Restarted(u64),
}

/// Polls one file's length and records growth as output (R5.7).
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use stallwarden_sources::file::{Change, FileGrowth};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("transcript.jsonl");
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("agent", Profile::default()).unwrap();
/// let mut growth = FileGrowth::new(&path, task.recorder());
///
/// assert_eq!(growth.poll().unwrap(), Change::Missing);
/// std::fs::File::create(&path).unwrap().write_all(b"{}\n").unwrap();
/// assert_eq!(growth.poll().unwrap(), Change::Grew(3));
/// assert_eq!(task.status().unwrap().total_bytes, 3);
/// ```
pub struct FileGrowth {
    path: PathBuf,
    recorder: Recorder,
    /// Length and identity (dev, inode) at the last poll; `None` before
    /// the first poll.
    last: Option<Seen>,
    reported_error: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Missing,
    File { len: u64, dev: u64, ino: u64 },
}

impl fmt::Debug for FileGrowth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = match self.last {
            Some(Seen::File { len, .. }) => Some(len),
            _ => None,
        };
        f.debug_struct("FileGrowth")
            .field("path", &self.path)
            .field("task", &self.recorder.id())
            .field("len", &len)
            .finish()
    }
}

impl FileGrowth {
    /// Watches `path` for the task behind `recorder`. Nothing is read until
    /// the first [`poll`](Self::poll).
    pub fn new(path: impl AsRef<Path>, recorder: Recorder) -> Self {
        FileGrowth {
            path: path.as_ref().to_owned(),
            recorder,
            last: None,
            reported_error: false,
        }
    }

    /// Returns the path watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stats the file once and records new bytes as an `output` signal.
    ///
    /// On error the last known state is kept, so a passing failure (a
    /// permission flip) does not count the whole file as new afterwards.
    pub fn poll(&mut self) -> Result<Change, FileError> {
        let now = match std::fs::metadata(&self.path) {
            Ok(m) if !m.is_file() => return Err(FileError::NotAFile(self.path.clone())),
            Ok(m) => Seen::File {
                len: m.len(),
                dev: m.dev(),
                ino: m.ino(),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Seen::Missing,
            Err(source) => {
                return Err(FileError::Stat {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        let change = match (self.last, now) {
            (None, Seen::File { len, .. }) => Change::Baseline(len),
            (_, Seen::Missing) => Change::Missing,
            (Some(Seen::Missing), Seen::File { len: 0, .. }) => Change::Unchanged,
            (Some(Seen::Missing), Seen::File { len, .. }) => Change::Grew(len),
            (
                Some(Seen::File { len: was, dev, ino }),
                Seen::File {
                    len,
                    dev: d,
                    ino: i,
                },
            ) => {
                if (dev, ino) != (d, i) || len < was {
                    Change::Restarted(len)
                } else if len > was {
                    Change::Grew(len - was)
                } else {
                    Change::Unchanged
                }
            }
        };
        self.last = Some(now);
        match change {
            Change::Grew(n) | Change::Restarted(n) if n > 0 => self.recorder.output(n, 0),
            _ => {}
        }
        Ok(change)
    }

    /// Polls every `every` until the future is dropped.
    ///
    /// Errors are logged through `tracing` once until a poll succeeds again,
    /// and polling goes on. Cancel safe: dropping it between polls loses
    /// nothing. Returns only for a zero interval.
    pub async fn run(mut self, every: Duration) -> Result<Infallible, FileError> {
        if every.is_zero() {
            return Err(FileError::ZeroInterval);
        }
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match self.poll() {
                Ok(_) => self.reported_error = false,
                Err(e) if !self.reported_error => {
                    self.reported_error = true;
                    tracing::warn!(task = %self.recorder.id(), error = %e, "file growth poll failed");
                }
                Err(_) => {}
            }
        }
    }
}
