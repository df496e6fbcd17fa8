//! The output pumps (R5.1, R8.10): one thread per stream copies the
//! command's stdout or stderr to ours, unchanged and flushed per read; each
//! read is an `output` signal.
//!
//! Bytes the command wrote that the pump has not passed on yet are
//! progress (R8.16): a pump marks itself carrying from the moment its pipe
//! polls readable until the bytes it read are written out, and the verdict
//! first takes a look ([`PendingOutput`]): a pump carrying bytes (its write
//! held up by a slow reader downstream) or bytes unread in a pipe
//! (stallwarden stopped or starved past the budget) renew the output
//! budget, so the command is never stalled for a pipe stallwarden holds.
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
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use stallwarden::sources::output::CountingReader;
use stallwarden::{Recorder, SignalKind, VerdictLook};
use tokio::sync::mpsc::UnboundedSender;

use super::console::{Console, Stream};
use super::outputs::OutputReader;
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

/// What a verdict's look needs of one pump (R8.16): whether it carries
/// bytes it has not written out yet, and its pipe while it is open.
#[derive(Debug, Default)]
pub(crate) struct PumpWatch {
    carrying: AtomicBool,
    /// Whether the pump's last read held only lines that repeat recent
    /// ones (R5.12): bytes not judged yet are presumed like it.
    repeating: AtomicBool,
    /// The pipe's descriptor; `None` once closed. The pump closes it under
    /// this lock, so a look never asks a descriptor number reused since.
    fd: Mutex<Option<RawFd>>,
}

impl PumpWatch {
    /// Whether output of the command that counts as work is on its way:
    /// read and not yet written out, or waiting unread in the pipe, while
    /// the last bytes judged were not only a repeat (R5.12: a loop whose
    /// reader downstream is slow is still a loop).
    fn pending(&self) -> bool {
        if self.repeating.load(Ordering::SeqCst) {
            return false;
        }
        // The pipe first: bytes read from it after this look were marked
        // carrying before they left it.
        let unread = self
            .fd
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|fd| unread_bytes(fd) > 0);
        unread || self.carrying.load(Ordering::SeqCst)
    }
}

/// How many bytes wait unread in pipe or pty `fd` (FIONREAD); 0 when it
/// cannot tell.
fn unread_bytes(fd: RawFd) -> libc::c_int {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through a valid pointer; `fd` is
    // open (held under the watch's lock).
    if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) } != 0 {
        return 0;
    }
    n
}

/// The look before each verdict on the command (R8.16, R3.10): output on
/// its way through any pump counts as output now.
#[derive(Debug)]
pub(crate) struct PendingOutput {
    pub(crate) recorder: Recorder,
    pub(crate) pumps: Vec<Arc<PumpWatch>>,
}

impl VerdictLook for PendingOutput {
    fn before_verdict(&self) {
        if self.pumps.iter().any(|p| p.pending()) {
            tracing::debug!("output on its way through stallwarden at the verdict: progress");
            self.recorder.signal(SignalKind::Output);
        }
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
    /// R8.16: what the verdict's look reads of this pump.
    pub(crate) watch: Arc<PumpWatch>,
}

impl Pump {
    /// Starts copying `from` on a thread of its own; the error when the
    /// thread cannot be had (the caller then stops the command, R8.9).
    pub(crate) fn spawn(self, from: Box<dyn OutputReader>) -> io::Result<()> {
        if super::failpoint("pump") {
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        *self
            .watch
            .fd
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((*from).as_raw_fd());
        std::thread::Builder::new()
            .name(format!("stallwarden-{:?}", self.to).to_lowercase())
            .spawn(move || self.copy(from))
            .map(drop)
    }

    fn copy(mut self, from: Box<dyn OutputReader>) {
        let fd = (*from).as_raw_fd();
        let mut reader = CountingReader::new(from, self.recorder.clone());
        if self.tap.is_some() {
            // R5.12: the agent stream judges what the agent says and calls.
            reader = reader.counting_only();
        }
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // R8.16: carrying from before the bytes leave the pipe until
            // they are written out (a look sees them in one place or the
            // other); not while waiting for the command to write.
            wait_readable(fd);
            self.watch.carrying.store(true, Ordering::SeqCst);
            let read = reader.read(&mut buf);
            let repeat = reader.last_kind() == Some(SignalKind::Repeat);
            self.watch.repeating.store(repeat, Ordering::SeqCst);
            let go_on = self.pass_on(read, &buf);
            self.watch.carrying.store(false, Ordering::SeqCst);
            if !go_on {
                break;
            }
        }
        {
            // Closed under the watch's lock: no look asks a reused number.
            let mut fd = self
                .watch
                .fd
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *fd = None;
            drop(reader);
        }
        if let Some(tap) = &mut self.tap {
            tap.finish();
        }
        let _ = self.done.send(());
    }

    /// Passes one read on; false when the pump is done with the pipe.
    fn pass_on(&mut self, read: io::Result<usize>, buf: &[u8]) -> bool {
        match read {
            Ok(0) => false,
            Ok(n) => {
                self.seen.0.store(true, Ordering::SeqCst);
                if let Some(tap) = &mut self.tap {
                    tap.feed(&buf[..n]);
                }
                if let Err(e) = self.console.command_output(self.to, &buf[..n]) {
                    self.failed(&e);
                    // Dropping the reader closes the read end: the
                    // command's next write to this pipe breaks (R8.10).
                    return false;
                }
                true
            }
            // EINTR reads again; any other error ends the pump: EIO is a
            // pty's end of file, its last slave holder closed it (--pty,
            // R8.11).
            Err(e) => e.kind() == io::ErrorKind::Interrupted,
        }
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

/// Waits until `fd` has bytes to read, or its end (or an error) is there
/// for the read to find.
fn wait_readable(fd: RawFd) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll reads and writes one pollfd we own.
        let r = unsafe { libc::poll(&mut p, 1, -1) };
        if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}
