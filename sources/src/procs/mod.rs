//! Process-table sampling of a task's descendants (R5.5).
//!
//! [`ProcStat`] parses one `/proc/[pid]/stat` line; [`ProcTable`] reads a
//! tree once per sample (following the kernel's children lists, or walking
//! the table) and keeps the previous CPU readings so each child gets its CPU
//! used since the last sample; [`ProcessSampler`] runs that
//! on an interval on its own std thread and hands the guard a cached view
//! ([`SampledChildren`]), so status and stall events never read `/proc`
//! (R4.2). Only the executable name (`comm`) is read, never the command line:
//! arguments carry credentials.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use watchdog_core::sys::{btime_ms, proc_root, ticks_per_second, ProcDir};
use watchdog_core::{ChildInfo, ProcState};

pub mod blocked;
pub mod net;
mod received;
mod sampler;
mod stat;
mod syscall;

pub use received::NetMeter;
pub use sampler::{check_interval, sample_once, ProcessSampler, SampledChildren};
pub use stat::{parse_btime, state_from_code, ProcStat, StatError};

/// The sampling interval when none is given (R5.5).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);
/// The shortest sampling interval allowed (R5.5).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest sampling interval allowed (R5.5).
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// The most children one sample keeps, eldest first (R5.5).
pub const MAX_CHILDREN: usize = 24;
/// Every this many samples a [`ProcTable`] reads every process's `stat`,
/// even those it knows to be outside the tree (see [`ProcTable`]).
pub const FULL_WALK_EVERY: u32 = 8;

/// Why process sampling failed or was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcsError {
    /// The interval is outside 1 s..=60 s; it is refused, not clamped.
    #[error("process sampling interval {0:?} is out of range: must be 1s..=60s")]
    Interval(Duration),
    /// The process table could not be listed.
    #[error("cannot read the process table at {}: {source}", path.display())]
    Unreadable {
        /// The directory tried.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// This platform has no `/proc` to sample.
    #[error(
        "process sampling is not supported on this platform (it reads Linux {})",
        proc_root().display()
    )]
    Unsupported,
    /// Starting the sampling thread failed.
    #[error("cannot start the process sampler thread: {0}")]
    Thread(io::Error),
}

/// One sample of a process tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TreeSample {
    /// Up to [`MAX_CHILDREN`] descendants of the root, eldest first.
    pub children: Vec<ChildInfo>,
    /// How many descendants there were before the cut to [`MAX_CHILDREN`].
    pub descendants: usize,
    /// The root itself, sampled like a child (its CPU since the previous
    /// sample, what it is blocked on); absent when it is gone.
    pub root: Option<ChildInfo>,
    /// CPU the whole tree (root included) used since the previous sample,
    /// counting processes that appeared since in full; absent on the first.
    pub cpu_delta_ms: Option<u64>,
    /// Every process of the tree, the root first, uncut (for [`NetMeter`]).
    pub pids: Vec<u32>,
}

/// A reader of a `/proc` tree that remembers the last CPU readings, so each
/// sample can say how much CPU every child used since the one before.
///
/// Where the kernel lists each thread's children
/// (`/proc/[pid]/task/[tid]/children`, Linux 3.5+ with
/// `CONFIG_PROC_CHILDREN`, as on every mainstream distribution), a sample
/// follows them down from the root and reads only the tree: its cost grows
/// with the tree, not with the machine's process count (R9.4). Otherwise it
/// walks the table, reading only `stat` files, and `wchan` only for the
/// children it keeps; processes found outside the tree are not read again
/// until the kernel's pid counter passes their pid (a reuse could put a new
/// descendant there) or until the next full walk, every [`FULL_WALK_EVERY`]
/// samples. Switching to another root pid starts over.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::ProcTable;
///
/// let mut table = ProcTable::new();
/// # #[cfg(target_os = "linux")] {
/// let me = std::process::id();
/// let first = table.sample(me).unwrap();
/// assert!(first.cpu_delta_ms.is_none()); // nothing to compare with yet
/// let second = table.sample(me).unwrap();
/// assert!(second.cpu_delta_ms.is_some());
/// # }
/// ```
pub struct ProcTable {
    root: PathBuf,
    system: bool,
    ticks: u64,
    btime_ms: Option<u64>,
    /// Cumulative CPU ms of every process of the tree at the last sample,
    /// keyed by pid and start time so a reused pid is a new process.
    prev: Option<HashMap<(u32, u64), u64>>,
    /// Pids that were outside the tree at the last sample; see `read_table`.
    outsiders: HashSet<u32>,
    /// The root the cached knowledge is about.
    tree_root: Option<u32>,
    /// The last pid the kernel had allocated at the last sample.
    last_pid: Option<u32>,
    /// Samples since the last walk that read every process.
    since_full_walk: u32,
    /// The table's directory, opened once; stat files are opened from it.
    dir: Option<ProcDir>,
    /// Follow the kernel's children lists when it has them.
    follow_children: bool,
    /// Say what suspects are blocked on (R8.13).
    blocked_on: bool,
}

impl fmt::Debug for ProcTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcTable")
            .field("root", &self.root)
            .field("ticks_per_second", &self.ticks)
            .field("tracked", &self.prev.as_ref().map_or(0, HashMap::len))
            .finish()
    }
}

impl Default for ProcTable {
    fn default() -> Self {
        ProcTable::new()
    }
}

impl ProcTable {
    /// Reads the system's `/proc`.
    pub fn new() -> ProcTable {
        static BTIME_MS: OnceLock<Option<u64>> = OnceLock::new();
        let btime_ms = *BTIME_MS.get_or_init(|| btime_ms(proc_root()));
        ProcTable::build(proc_root().into(), btime_ms, true)
    }

    /// Reads a `/proc`-shaped tree at `root` (for fixtures): `root/stat`
    /// for the boot time and `root/[pid]/stat`, `root/[pid]/wchan`.
    pub fn at(root: impl Into<PathBuf>) -> ProcTable {
        let root = root.into();
        let btime_ms = btime_ms(&root);
        ProcTable::build(root, btime_ms, false)
    }

    fn build(root: PathBuf, btime_ms: Option<u64>, system: bool) -> ProcTable {
        ProcTable {
            btime_ms,
            root,
            system,
            ticks: ticks_per_second(),
            prev: None,
            outsiders: HashSet::new(),
            tree_root: None,
            last_pid: None,
            since_full_walk: 0,
            dir: None,
            follow_children: true,
            blocked_on: true,
        }
    }

    /// Walks the whole table on every sample, never following the kernel's
    /// children lists: what a kernel without them gets, kept for comparing
    /// the two ways.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::procs::ProcTable;
    ///
    /// let mut table = ProcTable::new().walk_only();
    /// # #[cfg(target_os = "linux")]
    /// assert!(table.sample(std::process::id()).is_ok());
    /// ```
    #[must_use]
    pub fn walk_only(mut self) -> ProcTable {
        self.follow_children = false;
        self
    }

    /// Leaves out what each process is blocked on (R8.13): what a sample
    /// cost before it was read, kept for comparing the two in benches.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::procs::ProcTable;
    ///
    /// let mut table = ProcTable::new().without_blocked_on();
    /// # #[cfg(target_os = "linux")]
    /// assert!(table.peek(std::process::id()).unwrap().root.unwrap().blocked_on.is_none());
    /// ```
    #[must_use]
    pub fn without_blocked_on(mut self) -> ProcTable {
        self.blocked_on = false;
        self
    }

    /// Returns the clock ticks per second CPU and start times are counted in.
    pub fn ticks_per_second(&self) -> u64 {
        self.ticks
    }

    /// Samples the descendants of `root_pid`: up to [`MAX_CHILDREN`], eldest
    /// first. A root that no longer exists has no descendants.
    pub fn sample(&mut self, root_pid: u32) -> Result<TreeSample, ProcsError> {
        self.sample_as(root_pid, true)
    }

    /// Samples like [`ProcTable::sample`] but keeps the CPU readings of the
    /// previous sample, so the next one still measures from there: what a
    /// verdict looks at (R8.13) without taking progress away from the
    /// periodic samples (R5.11).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::procs::ProcTable;
    /// # #[cfg(target_os = "linux")] {
    /// let mut table = ProcTable::new();
    /// let me = std::process::id();
    /// table.sample(me).unwrap();
    /// let look = table.peek(me).unwrap();
    /// assert_eq!(look.root.unwrap().pid, me); // the root is sampled too
    /// # }
    /// ```
    pub fn peek(&mut self, root_pid: u32) -> Result<TreeSample, ProcsError> {
        self.sample_as(root_pid, false)
    }

    fn sample_as(&mut self, root_pid: u32, commit: bool) -> Result<TreeSample, ProcsError> {
        if self.system && cfg!(not(target_os = "linux")) {
            return Err(ProcsError::Unsupported);
        }
        if self.tree_root != Some(root_pid) {
            // What is known about one tree says nothing about another.
            self.tree_root = Some(root_pid);
            self.prev = None;
            self.last_pid = None;
        }
        let table = self.read_table(root_pid)?;

        let mut kids: HashMap<u32, Vec<usize>> = HashMap::new();
        let mut root = None;
        for (i, p) in table.iter().enumerate() {
            kids.entry(p.ppid).or_default().push(i);
            if p.pid == root_pid {
                root = Some(i);
            }
        }
        let mut tree: Vec<usize> = Vec::new();
        if let Some(r) = root {
            // The root is walked for CPU only; it is not its own child. The
            // marks keep an odd table (a pid listed as its own parent) from
            // looping.
            let mut in_tree = vec![false; table.len()];
            in_tree[r] = true;
            let mut stack = vec![r];
            while let Some(i) = stack.pop() {
                for &c in kids.get(&table[i].pid).into_iter().flatten() {
                    if !in_tree[c] {
                        in_tree[c] = true;
                        tree.push(c);
                        stack.push(c);
                    }
                }
            }
        }

        for &i in &tree {
            self.outsiders.remove(&table[i].pid);
        }

        let per_second = self.ticks;
        let ms = move |ticks: u64| ticks.saturating_mul(1000) / per_second;
        // R5.11: a process's CPU counts the children it reaped, so a child
        // that lived and exited between two samples is not lost.
        let total = |p: &ProcStat| {
            ms(p.utime
                .saturating_add(p.stime)
                .saturating_add(p.cutime)
                .saturating_add(p.cstime))
        };
        let prev = self.prev.take();
        let mut seen = HashMap::with_capacity(tree.len() + 1);
        let mut tree_delta = 0i128;
        for &i in tree.iter().chain(root.iter()) {
            let p = &table[i];
            let now = total(p);
            let before = prev
                .as_ref()
                .and_then(|m| m.get(&(p.pid, p.starttime)).copied());
            tree_delta += i128::from(now.saturating_sub(before.unwrap_or(0)));
            seen.insert((p.pid, p.starttime), now);
        }
        // What a process that is gone since had used was counted then; its
        // reaper's children times now count it again: take it out once.
        for (key, gone) in prev.iter().flatten() {
            if !seen.contains_key(key) {
                tree_delta -= i128::from(*gone);
            }
        }
        let tree_delta = u64::try_from(tree_delta.max(0)).unwrap_or(u64::MAX);

        tree.sort_unstable_by_key(|&i| (table[i].starttime, table[i].pid));
        let descendants = tree.len();
        // R8.13: what each kept process is blocked on, asked of the tree's
        // processes only (pipes are matched across them).
        let members: Vec<ProcStat> = root
            .iter()
            .chain(tree.iter())
            .map(|&i| table[i].clone())
            .collect();
        tree.truncate(MAX_CHILDREN);
        let mut children = Vec::with_capacity(tree.len());
        let mut root_info = None;
        let (fs_root, system) = (self.root.clone(), self.system);
        let mut inspector = blocked::Inspector::new(&fs_root, system, &members);
        if !commit {
            inspector = inspector.with_dead_connections();
        }
        for &i in root.iter().chain(tree.iter()) {
            let p = &table[i];
            let now = seen[&(p.pid, p.starttime)];
            let before = prev
                .as_ref()
                .and_then(|m| m.get(&(p.pid, p.starttime)).copied());
            let wchan = self.read_wchan(p.pid);
            // At a verdict's look, a process that started since the last
            // sample has used all its CPU since it: its total is its delta
            // (R8.13). Without it, the `cat` of `sleep N | cat` started
            // just after a sample had no delta, was no suspect, and went
            // undescribed beside its `sh` (6 runs in 10 on a loaded
            // machine). A periodic sample keeps R5.5's rule: two samples.
            let cpu_delta_ms = match before {
                Some(b) => Some(now.saturating_sub(b)),
                None if !commit && prev.is_some() => Some(now),
                None => None,
            };
            // A periodic sample asks only of the suspects (R5.5's rule); a
            // verdict's look asks of every process (R8.13).
            let ask = self.blocked_on
                && (!commit || p.state == ProcState::DiskWait || cpu_delta_ms == Some(0));
            let blocked_on = ask
                .then(|| inspector.describe(p.pid, p.state, wchan.as_deref()))
                .flatten();
            let info = ChildInfo {
                pid: p.pid,
                name: p.comm.clone(),
                state: p.state,
                wchan,
                blocked_on,
                started_unix_ms: self
                    .btime_ms
                    .map(|b| b.saturating_add(p.starttime.saturating_mul(1000) / self.ticks)),
                cpu_ms: ms(p.utime.saturating_add(p.stime)),
                cpu_delta_ms,
            };
            if Some(i) == root {
                root_info = Some(info);
            } else {
                children.push(info);
            }
        }
        let cpu_delta_ms = prev.is_some().then_some(tree_delta);
        if commit {
            self.prev = Some(seen);
        } else {
            self.prev = prev;
        }
        Ok(TreeSample {
            children,
            descendants,
            root: root_info,
            cpu_delta_ms,
            pids: members.iter().map(|p| p.pid).collect(),
        })
    }

    /// Reads the `stat` of every process that can be in the tree of
    /// `root_pid`; processes that vanish while it walks, or whose line does
    /// not parse, are left out.
    ///
    /// Reading every process's `stat` costs most of a sample, so a pid seen
    /// outside the tree at the last sample is not read again: a process that
    /// is not a descendant never becomes one (orphans move up to a reaper
    /// that is already their ancestor, never across). Only pid reuse could
    /// put a new descendant under an old outsider's pid, and reuse needs the
    /// kernel's pid counter (`/proc/loadavg`, last field) to pass that pid
    /// again: pids the counter passed since the last sample are read again.
    /// A counter that went all the way round between two samples cannot be
    /// told from one that did not move, so every
    /// [`FULL_WALK_EVERY`]th sample reads everything anyway.
    fn read_table(&mut self, root_pid: u32) -> Result<Vec<ProcStat>, ProcsError> {
        let unreadable = |root: &Path, source| ProcsError::Unreadable {
            path: root.to_path_buf(),
            source,
        };
        let dir = match &mut self.dir {
            Some(dir) => dir,
            None => self
                .dir
                .insert(ProcDir::open(&self.root).map_err(|e| unreadable(&self.root, e))?),
        };
        if self.follow_children {
            if let Some(tree) = read_tree(dir, root_pid) {
                return Ok(tree);
            }
        }
        let last_pid = dir.last_pid();
        let pids = dir.pids().map_err(|e| unreadable(&self.root, e))?;
        let full = self.since_full_walk + 1 >= FULL_WALK_EVERY
            || self.last_pid.is_none()
            || last_pid.is_none();
        let before = self.last_pid;
        let passed = |pid: u32| match (before, last_pid) {
            (Some(before), Some(now)) if now >= before => pid > before && pid <= now,
            (Some(before), Some(now)) => pid > before || pid <= now,
            _ => true,
        };
        let outsiders = std::mem::take(&mut self.outsiders);
        let mut table = Vec::with_capacity(32);
        for &pid in &pids {
            if !full && pid != root_pid && outsiders.contains(&pid) && !passed(pid) {
                continue;
            }
            match dir.stat(pid) {
                None => continue,
                Some(Ok(stat)) => table.push(stat),
                Some(Err(e)) => {
                    tracing::debug!(pid, error = %e, "process sampler: unparsable stat skipped")
                }
            }
        }
        self.last_pid = last_pid;
        self.since_full_walk = if full { 0 } else { self.since_full_walk + 1 };
        // Everything listed becomes an outsider except the tree, which the
        // caller takes out again once it knows it.
        self.outsiders = pids.into_iter().filter(|&p| p != root_pid).collect();
        Ok(table)
    }

    fn read_wchan(&mut self, pid: u32) -> Option<String> {
        self.dir.as_mut()?.wchan(pid)
    }
}

/// Reads the `stat` of the root and of every process the kernel lists as a
/// child of one of the tree's threads, down the tree; `None` when the root
/// has no children lists to follow (the caller walks the table instead).
/// Processes that vanish on the way are left out, and a pid listed twice
/// (or in a loop, in a hostile fixture) is read once.
fn read_tree(dir: &mut ProcDir, root_pid: u32) -> Option<Vec<ProcStat>> {
    let mut table = Vec::new();
    let mut queue = vec![root_pid];
    let mut queued = HashSet::from([root_pid]);
    while let Some(pid) = queue.pop() {
        let is_root = pid == root_pid;
        match dir.stat(pid) {
            None if is_root => {
                // No root: no descendants, whichever way one looks.
                return Some(table);
            }
            None => continue,
            Some(Ok(stat)) => table.push(stat),
            Some(Err(e)) => {
                tracing::debug!(pid, error = %e, "process sampler: unparsable stat skipped");
                continue;
            }
        }
        match dir.children(pid) {
            Some(kids) => {
                for kid in kids {
                    if queued.insert(kid) {
                        queue.push(kid);
                    }
                }
            }
            None if is_root => return None,
            None => {}
        }
    }
    Some(table)
}
