//! The `net` signal (R5.11) on a real process and real loopback sockets:
//! a Python client connected to a server this test holds on 127.0.0.1.
//! The test decides when bytes are sent, waits for the client to say it
//! got them, and takes each sample itself (`sample_now`) on a virtual
//! clock, so nothing here depends on timing.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use stallwarden_sources::procs::{NetMeter, ProcessSampler};
use watchdog_core::{Guard, KindSet, ManualClock, Profile, SignalKind, TaskHandle};

/// Connects to the port in argv[1]; on stdin, `connect` opens another
/// connection and `close` closes the oldest; after every read it prints
/// the total bytes received.
const CLIENT: &str = r#"
import selectors, socket, sys
port = int(sys.argv[1])
sel = selectors.DefaultSelector()
socks = []
total = 0
def connect():
    s = socket.create_connection(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_READ)
    socks.append(s)
    print("connected", flush=True)
connect()
sel.register(sys.stdin, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj is sys.stdin:
            cmd = sys.stdin.readline().strip()
            if cmd == "connect":
                connect()
            elif cmd == "close":
                s = socks.pop(0)
                sel.unregister(s)
                s.close()
                print("closed", flush=True)
            else:
                sys.exit(0)
        else:
            data = key.fileobj.recv(65536)
            if not data:
                sel.unregister(key.fileobj)
                continue
            total += len(data)
            print("total", total, flush=True)
"#;

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn spawn(port: u16) -> Client {
        let mut child = Command::new("python3")
            .args(["-c", CLIENT, &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("python3");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Client {
            child,
            stdin,
            stdout,
        }
    }

    /// Reads the client's next line (a blocking read of its pipe: the
    /// client answers every step).
    fn said(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }

    fn tell(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").unwrap();
    }

    /// Waits until the client says it received `total` bytes in all.
    fn wait_total(&mut self, total: usize) {
        let want = format!("total {total}");
        loop {
            let line = self.said();
            assert!(line.starts_with("total"), "unexpected {line:?}");
            if line == want {
                return;
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn accept(listener: &TcpListener) -> TcpStream {
    listener.accept().unwrap().0
}

/// How long ago `task`'s last `net` signal was, if any.
fn net_age(task: &TaskHandle) -> Option<Duration> {
    task.last_signal(SignalKind::Net).map(|s| s.age)
}

// R5.11: with `net` in renewed-by, a sample after the client's sockets
// received bytes records `net`; a sample after silence does not. A socket
// opened between two samples counts what it received; one that closed
// counts nothing. A task without `net` in renewed-by gets no `net` signal
// from the same bytes.
#[test]
fn the_sampler_records_net_while_a_socket_receives_and_not_while_silent() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = Client::spawn(listener.local_addr().unwrap().port());
    assert_eq!(client.said(), "connected");
    let mut first = accept(&listener);

    let clock = ManualClock::new();
    let guard = Guard::builder().clock(clock.clone()).build();
    let renewing = KindSet::DEFAULT_RENEWING.with(SignalKind::Net);
    let opted = guard
        .start("download", Profile::default().renewed_by(renewing))
        .unwrap();
    let plain = guard.start("plain", Profile::default()).unwrap();
    let pid = client.child.id();
    let every = Duration::from_secs(60); // the test samples by hand
    let sampler = ProcessSampler::spawn(pid, every, Some(opted.recorder())).unwrap();
    let plain_sampler = ProcessSampler::spawn(pid, every, Some(plain.recorder())).unwrap();
    let sample = || {
        clock.advance(Duration::from_secs(1));
        assert!(sampler.sample_now().is_some());
        assert!(plain_sampler.sample_now().is_some());
    };

    // Silent since the baseline: no signal.
    sample();
    assert_eq!(net_age(&opted), None, "nothing was received");

    first.write_all(&[b'x'; 100]).unwrap();
    client.wait_total(100);
    sample();
    assert_eq!(net_age(&opted), Some(Duration::ZERO), "100 bytes arrived");
    assert_eq!(net_age(&plain), None, "net is not in plain's renewed-by");

    sample();
    assert_eq!(
        net_age(&opted),
        Some(Duration::from_secs(1)),
        "silent for a sample: the last net signal stays a second old"
    );

    // A new socket: what it received since it opened is progress.
    client.tell("connect");
    assert_eq!(client.said(), "connected");
    let mut second = accept(&listener);
    second.write_all(&[b'y'; 50]).unwrap();
    client.wait_total(150);
    sample();
    assert_eq!(net_age(&opted), Some(Duration::ZERO), "the new socket");

    // A socket going away is not progress.
    client.tell("close");
    assert_eq!(client.said(), "closed");
    sample();
    assert_eq!(net_age(&opted), Some(Duration::from_secs(1)));

    // The socket still open keeps counting.
    second.write_all(&[b'z'; 10]).unwrap();
    client.wait_total(160);
    sample();
    assert_eq!(net_age(&opted), Some(Duration::ZERO));
    assert_eq!(net_age(&plain), None);
    drop(first);
}

// R5.11: the first sample is the baseline: bytes received before the
// sampler started are not progress later.
#[test]
fn bytes_received_before_the_start_are_not_progress() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = Client::spawn(listener.local_addr().unwrap().port());
    assert_eq!(client.said(), "connected");
    let mut conn = accept(&listener);
    conn.write_all(&[b'x'; 4096]).unwrap();
    client.wait_total(4096);

    let clock = ManualClock::new();
    let guard = Guard::builder().clock(clock.clone()).build();
    let renewing = KindSet::DEFAULT_RENEWING.with(SignalKind::Net);
    let task = guard
        .start("late", Profile::default().renewed_by(renewing))
        .unwrap();
    let sampler = ProcessSampler::spawn(
        client.child.id(),
        Duration::from_secs(60),
        Some(task.recorder()),
    )
    .unwrap();
    clock.advance(Duration::from_secs(1));
    sampler.sample_now().unwrap();
    assert_eq!(net_age(&task), None, "the 4096 bytes were before the start");
}

// R5.11: the two ways of reading a socket (a copy of the descriptor, the
// kernel's socket dump) count the same bytes on a real process.
#[test]
fn a_descriptor_copy_and_the_socket_dump_count_alike() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = Client::spawn(listener.local_addr().unwrap().port());
    assert_eq!(client.said(), "connected");
    let mut conn = accept(&listener);
    let pids = [client.child.id()];
    let mut copies = NetMeter::new();
    let mut dump = NetMeter::new().dump_only();
    assert_eq!(copies.sample(&pids).unwrap(), None);
    assert_eq!(dump.sample(&pids).unwrap(), None);
    conn.write_all(&[b'x'; 1234]).unwrap();
    client.wait_total(1234);
    assert_eq!(copies.sample(&pids).unwrap(), Some(1234));
    assert_eq!(dump.sample(&pids).unwrap(), Some(1234));
    assert_eq!(copies.sample(&pids).unwrap(), Some(0));
    assert_eq!(dump.sample(&pids).unwrap(), Some(0));
}

// R5.11: a socket out of sight (held by no process sampled) is remembered
// for three samples: seen again, it counts what it received since it was
// last read. After four it is forgotten and counts in full, as a new
// socket would (kills the issue-26 mutants of NetMeter::sample's
// FORGET_AFTER comparison).
#[test]
fn a_socket_out_of_sight_is_remembered_for_three_samples() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = Client::spawn(listener.local_addr().unwrap().port());
    assert_eq!(client.said(), "connected");
    let mut conn = accept(&listener);
    let pids = [client.child.id()];
    let mut meter = NetMeter::new();
    conn.write_all(&[b'x'; 100]).unwrap();
    client.wait_total(100);
    assert_eq!(meter.sample(&pids).unwrap(), None);
    for _ in 0..3 {
        assert_eq!(meter.sample(&[]).unwrap(), Some(0));
    }
    conn.write_all(&[b'x'; 10]).unwrap();
    client.wait_total(110);
    assert_eq!(meter.sample(&pids).unwrap(), Some(10), "remembered");
    for _ in 0..4 {
        assert_eq!(meter.sample(&[]).unwrap(), Some(0));
    }
    conn.write_all(&[b'x'; 10]).unwrap();
    client.wait_total(120);
    assert_eq!(meter.sample(&pids).unwrap(), Some(120), "forgotten");
}
