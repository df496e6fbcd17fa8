//! The notify socket's serving thread: one datagram at a time, its
//! passed descriptors closed after its assignments took effect (R5.4).

use std::io;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
use watchdog_core::Recorder;

use super::{Malformed, Notification, NotifyStats, Shared, MAX_DATAGRAM, TRIGGER_REASON};

/// Linux refuses to pass more than this many descriptors in one message
/// (`SCM_MAX_FD`), so a control buffer this large is never truncated and
/// every descriptor a client sends reaches us, to be closed.
const SCM_MAX_FD: usize = 253;

/// The serving loop: wait for a datagram or the stop byte, never spinning.
pub(super) fn serve(
    socket: &UnixDatagram,
    woken: &UnixDatagram,
    shared: &Shared,
    recorder: &Recorder,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut cmsg = nix::cmsg_space!([RawFd; SCM_MAX_FD], libc::ucred);
    loop {
        let mut fds = [
            libc::pollfd {
                fd: socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: woken.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!(error = %err, "notify socket: poll failed, no longer serving");
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents != 0 {
            receive_one(socket, &mut buf, &mut cmsg, shared, recorder);
        }
    }
}

/// Receives and handles one datagram, closing every descriptor it carried.
fn receive_one(
    socket: &UnixDatagram,
    buf: &mut [u8],
    cmsg: &mut [u8],
    shared: &Shared,
    recorder: &Recorder,
) {
    let (bytes, flags, passed) = {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = match recvmsg::<UnixAddr>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut *cmsg),
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return,
            Err(e) => {
                tracing::warn!(error = %e, "notify socket: receive failed");
                return;
            }
        };
        let mut passed = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    // SAFETY: the kernel just installed these descriptors in
                    // this process for us alone; owning them closes them.
                    passed.extend(
                        fds.into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
        }
        (msg.bytes, msg.flags, passed)
    };

    let mut tally = NotifyStats {
        datagrams: 1,
        ..NotifyStats::default()
    };
    if flags.contains(MsgFlags::MSG_CTRUNC) {
        refuse(recorder, Malformed::ControlTruncated);
        tracing::error!("notify socket: passed descriptors were truncated");
    }
    let parsed = if flags.contains(MsgFlags::MSG_TRUNC) {
        Err(Malformed::Oversize)
    } else {
        Notification::parse_datagram(&buf[..bytes])
    };
    match parsed {
        Ok(lines) => {
            for line in lines {
                match line {
                    Ok(n) => apply(n, recorder, &mut tally),
                    Err(reason) => {
                        tracing::debug!(%reason, "notify socket: malformed assignment ignored");
                        refuse(recorder, reason);
                    }
                }
            }
        }
        Err(reason) => {
            tracing::debug!(%reason, bytes, "notify socket: malformed datagram ignored");
            refuse(recorder, reason);
        }
    }
    // Closed only now, after the assignments took effect and were counted:
    // a client released from its barrier may rely on everything it sent
    // before being seen, in the task and in `stats()` alike.
    tally.fds_closed = passed.len() as u64;
    let mut stats = shared.stats.lock();
    merge(&mut stats, &tally);
    drop(stats);
    drop(passed);
    shared.changed.notify_all();
}

/// Counts a malformed datagram or line on the task, where `describe`
/// shows it (R8.7): the one count, by reason (R10.6).
fn refuse(recorder: &Recorder, reason: Malformed) {
    crate::refusal::refuse(recorder, reason);
}

fn apply(n: Notification, recorder: &Recorder, tally: &mut NotifyStats) {
    match n {
        Notification::Heartbeat => {
            recorder.heartbeat();
            tally.heartbeats += 1;
        }
        Notification::Trigger => {
            tally.triggers += 1;
            if let Err(e) = recorder.trigger(TRIGGER_REASON) {
                tracing::debug!(error = %e, "notify socket: WATCHDOG=trigger not taken");
            }
        }
        Notification::Extend(by) => match recorder.extend(by) {
            Ok(_) => tally.extensions += 1,
            Err(e) => {
                tally.extensions_refused += 1;
                tracing::warn!(error = %e, "notify socket: EXTEND_TIMEOUT_USEC refused");
            }
        },
        Notification::Status(text) => {
            if !text.is_empty() {
                recorder.set_step(text);
            }
            tally.statuses += 1;
        }
        Notification::Ready => {
            recorder.ready();
            tally.readies += 1;
        }
        Notification::Barrier => tally.barriers += 1,
        Notification::Other(_) => tally.ignored += 1,
    }
}

fn merge(into: &mut NotifyStats, from: &NotifyStats) {
    into.datagrams += from.datagrams;
    into.heartbeats += from.heartbeats;
    into.triggers += from.triggers;
    into.extensions += from.extensions;
    into.extensions_refused += from.extensions_refused;
    into.statuses += from.statuses;
    into.readies += from.readies;
    into.barriers += from.barriers;
    into.fds_closed += from.fds_closed;
    into.ignored += from.ignored;
}
