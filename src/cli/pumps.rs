//! The output pumps (R5.1, R8.10): one thread per stream copies the
//! command's stdout or stderr to ours, unchanged and flushed per read; each
//! read is an `output` signal.
//!
//! When our stream breaks, the command's matching pipe is closed (the pump
//! stops reading and drops the read end), so the command sees the broken
//! pipe on its next write (SIGPIPE, or EPIPE where it ignores SIGPIPE), as
//! it would without stallwarden: `stallwarden run -- yes | head -1` ends at
//! once with 141, as under GNU `timeout`. A reader that went away (EPIPE)
//! is the reader's choice and said nowhere; any other failure (ENOSPC,
//! EIO) is said once on stderr and remembered in [`OutputLost`], so the run
//! never exits 0 after output was lost: it exits 1, as GNU tools do on a
//! write error, when the command exited 0 or died of the SIGPIPE that the
//! closing caused.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use stallwarden::sources::output::CountingReader;
use stallwarden::Recorder;
use tokio::sync::mpsc::UnboundedSender;

use super::console::{Console, Stream};
use super::stream::Tap;

/// Set once a write of the command's output failed for a reason other than
/// a reader gone away (R8.10).
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputLost(Arc<AtomicBool>);

impl OutputLost {
    /// Returns true once some output could not be written.
    pub(crate) fn lost(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Returns true the first time only: the failure is said once.
    fn first(&self) -> bool {
        !self.0.swap(true, Ordering::SeqCst)
    }
}

/// Set once the command wrote anything at all: a stall before that, on a
/// pipe, may be output held in the command's buffer (R8.11).
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputSeen(Arc<AtomicBool>);

impl OutputSeen {
    /// Returns true once some output was read.
    pub(crate) fn seen(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a pump needs besides the pipe it reads.
pub(crate) struct Pump {
    pub(crate) recorder: Recorder,
    pub(crate) console: Arc<Console>,
    pub(crate) to: Stream,
    /// Told once the pump is done with the pipe (end of file, or closed).
    pub(crate) done: UnboundedSender<()>,
    /// R5.10: each read also parsed as agent events.
    pub(crate) tap: Option<Tap>,
    pub(crate) lost: OutputLost,
    pub(crate) seen: OutputSeen,
}

impl Pump {
    /// Starts copying `from` on a thread of its own; the error when the
    /// thread cannot be had (the caller then stops the command, R8.9).
    pub(crate) fn spawn(self, from: impl Read + Send + 'static) -> io::Result<()> {
        if super::failpoint("pump") {
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        std::thread::Builder::new()
            .name(format!("stallwarden-{:?}", self.to).to_lowercase())
            .spawn(move || self.copy(from))
            .map(drop)
    }

    fn copy(mut self, from: impl Read) {
        let mut reader = CountingReader::new(from, self.recorder.clone());
        if self.tap.is_some() {
            // R5.12: the agent stream judges what the agent says and calls.
            reader = reader.counting_only();
        }
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.seen.0.store(true, Ordering::SeqCst);
                    if let Some(tap) = &mut self.tap {
                        tap.feed(&buf[..n]);
                    }
                    if let Err(e) = self.console.command_output(self.to, &buf[..n]) {
                        self.failed(&e);
                        // Dropping the reader closes the read end: the
                        // command's next write to this pipe breaks (R8.10).
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EIO is a pty's end of file: its last slave holder closed
                // it (--pty, R8.11).
                Err(_) => break,
            }
        }
        drop(reader);
        if let Some(tap) = &mut self.tap {
            tap.finish();
        }
        let _ = self.done.send(());
    }

    fn failed(&self, e: &io::Error) {
        let stream = match self.to {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        if e.kind() == io::ErrorKind::BrokenPipe {
            tracing::info!(
                stream,
                "our {stream} was closed by its reader: closing the command's"
            );
            return;
        }
        if self.lost.first() {
            self.console.line(&format!(
                "stallwarden: cannot write the command's {stream}: {e}; closing its pipe"
            ));
        }
        tracing::warn!(stream, error = %e, "output lost");
    }
}
