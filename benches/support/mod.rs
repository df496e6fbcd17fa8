//! Helpers shared by the benches, `compare` included (with `#[path]` from
//! `benches/compare/`): the physical floor of R9.1 and a real process tree to sample.
//! Each includer uses part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// The physical floor of R9.1: what the kernel's coarse monotonic clock
/// costs to read, in nanoseconds since boot. Read here directly, not through
/// stallwarden, so the floor owes nothing to the code it measures.
#[inline(always)]
pub fn coarse_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is valid
    // on every Linux since 2.6.32.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// A small real process tree to sample: a shell with children and a
/// grandchild, in its own process group so it can be killed whole.
pub struct Tree {
    child: Child,
}

impl Tree {
    /// Spawns the tree.
    pub fn spawn() -> Self {
        let child = Command::new("sh")
            .args([
                "-c",
                "sleep 120 & sleep 120 & (sleep 120 & sleep 120 & wait) & wait",
            ])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn sh");
        Tree { child }
    }

    /// The root's pid, which is also the group's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// About 100 processes holding TCP sockets, for the cost of the `net`
/// signal (R5.11): a Python server that forks `clients` children, each
/// connected to it over loopback and then idle; the server holds every
/// accepted end. In its own process group.
pub struct SocketTree {
    child: Child,
}

impl SocketTree {
    /// Spawns the tree and waits until every client is connected.
    pub fn spawn(clients: usize) -> Self {
        const SCRIPT: &str = r#"
import os, signal, socket, sys
n = int(sys.argv[1])
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(n)
port = s.getsockname()[1]
for _ in range(n):
    if os.fork() == 0:
        s.close()
        c = socket.create_connection(("127.0.0.1", port))
        while True:
            signal.pause()
held = [s.accept()[0] for _ in range(n)]
for c in held:
    c.sendall(b"x" * 100)
print("ready", flush=True)
while True:
    signal.pause()
"#;
        let mut child = Command::new("python3")
            .args(["-c", SCRIPT, &clients.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn python3");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().expect("stdout")),
            &mut line,
        )
        .expect("the tree's ready line");
        assert_eq!(line.trim(), "ready");
        SocketTree { child }
    }

    /// The root's pid, which is also the group's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for SocketTree {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}
