//! The sampling thread and the cached view the guard reads (R5.5, R4.2).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use watchdog_core::{ChildInfo, ChildProbe, Recorder, SignalKind};

use super::{NetMeter, ProcTable, ProcsError, MAX_INTERVAL, MIN_INTERVAL};

/// Samples the descendants of `root_pid` once from the system's `/proc`:
/// up to [`MAX_CHILDREN`](super::MAX_CHILDREN), eldest first, with no CPU deltas (there is no
/// previous sample). Keep a [`ProcTable`] to sample repeatedly.
///
/// # Examples
///
/// ```
/// # #[cfg(target_os = "linux")] {
/// let children = stallwarden_sources::procs::sample_once(std::process::id()).unwrap();
/// assert!(children.iter().all(|c| c.cpu_delta_ms.is_none()));
/// # }
/// ```
pub fn sample_once(root_pid: u32) -> Result<Vec<ChildInfo>, ProcsError> {
    ProcTable::new().sample(root_pid).map(|s| s.children)
}

/// Checks a sampling interval against 1 s..=60 s (R5.5); out of range is
/// refused with the range, never clamped.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sources::procs::check_interval;
/// assert!(check_interval(Duration::from_secs(15)).is_ok());
/// let err = check_interval(Duration::from_millis(500)).unwrap_err();
/// assert_eq!(err.to_string(), "process sampling interval 500ms is out of range: must be 1s..=60s");
/// ```
pub fn check_interval(interval: Duration) -> Result<Duration, ProcsError> {
    if (MIN_INTERVAL..=MAX_INTERVAL).contains(&interval) {
        Ok(interval)
    } else {
        Err(ProcsError::Interval(interval))
    }
}

/// The last sample of a process's descendants, shared with the guard.
///
/// Cheap to read: it returns what the sampler already has and never reads
/// `/proc` itself (R4.2). `None` until the first sample, and after a sample
/// failed.
#[derive(Debug, Default)]
pub struct SampledChildren {
    last: Mutex<Option<Vec<ChildInfo>>>,
    /// The sampler, for a fresh look at a verdict (R8.13).
    sampling: Mutex<Weak<Sampling>>,
}

impl ChildProbe for SampledChildren {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        self.last.lock().clone()
    }

    fn verdict_children(&self) -> Option<Vec<ChildInfo>> {
        let sampling = self.sampling.lock().upgrade();
        match sampling {
            Some(s) => s.verdict().or_else(|| self.children()),
            None => self.children(),
        }
    }
}

impl fmt::Debug for Sampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sampling").field("pid", &self.pid).finish()
    }
}

/// What the sampling thread and the owner share.
struct Sampling {
    pid: u32,
    table: Mutex<ProcTable>,
    cache: Arc<SampledChildren>,
    recorder: Option<Recorder>,
    warned: AtomicBool,
    /// Bytes received on the tree's TCP sockets, read only when the task's
    /// `renewed-by` lists `net`: it costs a socket dump and a look at every
    /// process's descriptors per sample (R5.11).
    net: Option<Mutex<NetMeter>>,
    net_warned: AtomicBool,
}

impl Sampling {
    /// A fresh sample of the tree, the root first, that leaves the CPU
    /// readings to the periodic samples (R8.13, R5.11).
    fn verdict(&self) -> Option<Vec<ChildInfo>> {
        let sample = self.table.lock().peek(self.pid).ok()?;
        Some(sample.root.into_iter().chain(sample.children).collect())
    }

    fn run(&self) -> Option<Vec<ChildInfo>> {
        let sample = self.table.lock().sample(self.pid);
        let children = match sample {
            Ok(s) => {
                if s.cpu_delta_ms.is_some_and(|d| d > 0) {
                    if let Some(r) = &self.recorder {
                        r.signal(SignalKind::Cpu);
                    }
                }
                self.net(&s.pids);
                Some(s.children)
            }
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(pid = self.pid, error = %e, "process sampler cannot read the process table; children stay unknown");
                }
                None
            }
        };
        *self.cache.last.lock() = children.clone();
        children
    }

    /// Records a `net` signal when the tree's TCP sockets received bytes
    /// since the previous sample; the first sample is the baseline (R5.11).
    fn net(&self, pids: &[u32]) {
        let (Some(meter), Some(r)) = (&self.net, &self.recorder) else {
            return;
        };
        match meter.lock().sample(pids) {
            Ok(Some(received)) if received > 0 => r.signal(SignalKind::Net),
            Ok(_) => {}
            Err(e) => {
                if !self.net_warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(pid = self.pid, error = %e, "process sampler cannot read the TCP sockets; no net signal");
                }
            }
        }
    }
}

/// Samples a process's descendants on an interval, off the request path
/// (R5.5).
///
/// It runs on its own std thread, so it keeps sampling when the host's async
/// runtime is blocked; the first sample is taken before `spawn` returns (R5.11), then one every
/// interval. When the tree (the root included) used CPU since the previous
/// sample it records a `cpu` signal on the task. When the task's
/// `renewed-by` lists `net`, it also records a `net` signal when the tree's
/// TCP sockets received bytes since the previous sample (see [`NetMeter`]);
/// otherwise sockets are not looked at. A table that cannot be read
/// is logged once and the children stay absent. Dropping the sampler stops
/// its thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sources::procs::ProcessSampler;
/// use watchdog_core::ChildProbe;
///
/// let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// let sampler = ProcessSampler::spawn(std::process::id(), Duration::from_secs(15), None).unwrap();
/// # #[cfg(target_os = "linux")] {
/// let children = sampler.sample_now().unwrap();
/// assert!(children.iter().any(|c| c.pid == child.id() && c.name == "sleep"));
/// assert_eq!(sampler.children(), Some(children)); // the cached view
/// # }
/// assert!(ProcessSampler::spawn(1, Duration::from_secs(90), None).is_err());
/// child.kill().unwrap();
/// child.wait().unwrap();
/// ```
pub struct ProcessSampler {
    sampling: Arc<Sampling>,
    interval: Duration,
    /// Dropping this wakes the thread to stop.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for ProcessSampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessSampler")
            .field("pid", &self.sampling.pid)
            .field("interval", &self.interval)
            .field(
                "children",
                &self.sampling.cache.last.lock().as_ref().map(Vec::len),
            )
            .finish()
    }
}

impl ProcessSampler {
    /// Starts sampling the descendants of `pid` from the system's `/proc`
    /// every `interval` (1 s..=60 s). With a `recorder`, the task gets the
    /// cached view for status and stall events, `cpu` signals, and `net`
    /// signals if its `renewed-by` lists `net`.
    pub fn spawn(
        pid: u32,
        interval: Duration,
        recorder: Option<Recorder>,
    ) -> Result<ProcessSampler, ProcsError> {
        ProcessSampler::with_table(ProcTable::new(), pid, interval, recorder)
    }

    /// Starts sampling like [`ProcessSampler::spawn`], from `table`.
    pub fn with_table(
        table: ProcTable,
        pid: u32,
        interval: Duration,
        recorder: Option<Recorder>,
    ) -> Result<ProcessSampler, ProcsError> {
        let interval = check_interval(interval)?;
        let cache = Arc::new(SampledChildren::default());
        if let Some(r) = &recorder {
            r.set_children_probe(Arc::clone(&cache) as Arc<dyn ChildProbe>);
        }
        let net = recorder
            .as_ref()
            .filter(|r| r.renews(SignalKind::Net))
            .map(|_| Mutex::new(NetMeter::new()));
        let sampling = Arc::new(Sampling {
            pid,
            table: Mutex::new(table),
            cache,
            recorder,
            warned: AtomicBool::new(false),
            net,
            net_warned: AtomicBool::new(false),
        });
        *sampling.cache.sampling.lock() = Arc::downgrade(&sampling);
        // R5.11: the first sample is taken here, at the start, so CPU used
        // (and bytes received) before it is never counted as progress later.
        sampling.run();
        let (stop, stopped) = mpsc::channel::<()>();
        let worker = Arc::clone(&sampling);
        let thread = std::thread::Builder::new()
            .name("stallwarden-procs".into())
            .spawn(move || loop {
                match stopped.recv_timeout(interval) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                worker.run();
            })
            .map_err(ProcsError::Thread)?;
        Ok(ProcessSampler {
            sampling,
            interval,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Returns the root process id.
    pub fn pid(&self) -> u32 {
        self.sampling.pid
    }

    /// Returns the sampling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Takes a sample now, on the caller's thread, updates the cached view
    /// and returns it; `None` when the table cannot be read.
    pub fn sample_now(&self) -> Option<Vec<ChildInfo>> {
        self.sampling.run()
    }

    /// Returns the cached view to attach to a task with
    /// [`Recorder::set_children_probe`].
    pub fn probe(&self) -> Arc<SampledChildren> {
        Arc::clone(&self.sampling.cache)
    }
}

impl ChildProbe for ProcessSampler {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        self.sampling.cache.children()
    }

    fn verdict_children(&self) -> Option<Vec<ChildInfo>> {
        self.sampling.cache.verdict_children()
    }
}

impl Drop for ProcessSampler {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}
