//! Nothing escapes (R8.6): stallwarden makes itself the child subreaper, so a
//! descendant that leaves the command's process group (`setsid`, a double
//! fork) is re-parented to stallwarden instead of init. Its tree is then
//! stallwarden's own tree in `/proc`: cancel and kill reach it, and after the
//! command ends what is left is stopped (or kept) and named.
//!
//! Zombies of re-parented orphans are reaped here by pid, never with
//! `waitpid(-1)`, so the command's own status stays for the thread that
//! waits for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::{getpgrp, getpid, Pid};
use stallwarden::sources::procs::{ProcessSampler, SampledChildren};
use stallwarden::sys;
use stallwarden::{
    Action, ActionKind, ChildInfo, ChildProbe, Delivery, ProcessName, Recorder, Sink, SinkError,
};

/// The longest pause between two looks while [`stop_all`] waits for
/// processes to go (it starts at 1 ms and doubles).
const POLL: Duration = Duration::from_millis(50);

/// Makes this process the child subreaper (Linux `PR_SET_CHILD_SUBREAPER`).
///
/// Elsewhere, or when the kernel refuses, escaped descendants go to init as
/// before; the error says why.
pub(crate) fn become_subreaper() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER reads only its integer
        // arguments and touches no memory of ours.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().to_string())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("child subreapers are Linux-only".into())
    }
}

/// One line of `/proc/[pid]/stat`, the fields this module needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    pub(crate) name: String,
    pub(crate) zombie: bool,
    pub(crate) ppid: u32,
    pub(crate) pgid: u32,
}

impl Proc {
    /// Parses a stat line with the core's one parser (R10.6); `None` for
    /// a line it refuses. The name ends at the last `)`, as it may hold one.
    #[cfg(test)]
    pub(crate) fn parse(line: &str) -> Option<Proc> {
        Some(Proc::of(sys::ProcStat::parse(line.as_bytes()).ok()?))
    }

    /// The fields this module needs of a parsed stat line.
    fn of(s: sys::ProcStat) -> Proc {
        Proc {
            pid: s.pid,
            zombie: s.is_dead(),
            ppid: s.ppid,
            pgid: s.pgrp,
            name: s.comm,
        }
    }

    fn named(&self) -> ProcessName {
        ProcessName {
            pid: self.pid,
            name: self.name.clone(),
        }
    }
}

/// Reads every process's stat line; processes that vanish meanwhile are
/// left out.
fn table() -> Vec<Proc> {
    sys::scan(sys::proc_root())
        .unwrap_or_default()
        .into_iter()
        .map(Proc::of)
        .collect()
}

/// The descendants of `root` in `table`, eldest generation first.
pub(crate) fn descendants_in(table: &[Proc], root: u32) -> Vec<Proc> {
    let mut kids: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in table {
        if p.pid != p.ppid {
            kids.entry(p.ppid).or_default().push(p);
        }
    }
    let mut out: Vec<Proc> = Vec::new();
    let mut next = vec![root];
    let mut seen = std::collections::HashSet::from([root]);
    while let Some(pid) = next.pop() {
        for &c in kids.get(&pid).into_iter().flatten() {
            if seen.insert(c.pid) {
                out.push(c.clone());
                next.push(c.pid);
            }
        }
    }
    out
}

/// The pids the kernel lists as children of any thread of `pid`
/// (`/proc/PID/task/TID/children`); `None` when the kernel has no such
/// lists (built without `CONFIG_PROC_CHILDREN`) or `pid` is gone.
fn children_of(pid: u32) -> Option<Vec<u32>> {
    sys::children_of(sys::proc_root(), pid)
}

/// Reads one process's stat line.
fn stat_of(pid: u32) -> Option<Proc> {
    sys::read_stat(sys::proc_root(), pid).map(Proc::of)
}

/// Every process below `root`, eldest generation first, found by following
/// the kernel's children lists: the cost is the size of the tree, not of
/// the whole process table, so many runs side by side do not each read all
/// of `/proc` (issue 22). `None` without children lists.
fn tree_below(root: u32) -> Option<Vec<Proc>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::from([root]);
    let mut next = children_of(root)?;
    while let Some(pid) = next.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Some(p) = stat_of(pid) else { continue };
        if !p.zombie {
            next.extend(children_of(pid).unwrap_or_default());
        }
        out.push(p);
    }
    Some(out)
}

/// Every live process below stallwarden (the command's tree and whatever
/// escaped it), leaving out `except` (the command, while its status is
/// still to be collected).
pub(crate) fn our_tree(except: Option<u32>) -> Vec<Proc> {
    let me = getpid().as_raw() as u32;
    tree_below(me)
        .unwrap_or_else(|| descendants_in(&table(), me))
        .into_iter()
        .filter(|p| Some(p.pid) != except)
        // R8.14: a hook or stack taker running at a stall is ours, bounded
        // on its own, not something the command left.
        .filter(|p| !stallwarden::sinks::hook::is_helper(p.pid))
        .collect()
}

/// Reaps the zombies among stallwarden's own children, by pid, leaving
/// `except` alone (its status belongs to the thread waiting for it).
pub(crate) fn reap_orphans(except: Option<u32>) {
    let me = getpid().as_raw() as u32;
    let ours: Vec<Proc> = match children_of(me) {
        Some(pids) => pids.into_iter().filter_map(stat_of).collect(),
        None => table().into_iter().filter(|p| p.ppid == me).collect(),
    };
    for p in ours {
        if p.zombie && Some(p.pid) != except && !stallwarden::sinks::hook::is_helper(p.pid) {
            let _ = waitpid(Pid::from_raw(p.pid as i32), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// Sends `sig` to each process and to each process group led by one of
/// them (an escaped session's group), never to stallwarden's own group.
/// SIGTERM is followed by SIGCONT, so a stopped process runs its handler
/// (R8.9).
pub(crate) fn signal_all(procs: &[Proc], sig: Signal) {
    signal_each(procs, sig);
    if sig == Signal::SIGTERM {
        signal_each(procs, Signal::SIGCONT);
    }
}

fn signal_each(procs: &[Proc], sig: Signal) {
    let ours = getpgrp().as_raw() as u32;
    let leaders: std::collections::HashSet<u32> = procs.iter().map(|p| p.pid).collect();
    for p in procs {
        if p.pgid != ours && p.pgid > 1 && leaders.contains(&p.pgid) {
            let _ = killpg(Pid::from_raw(p.pgid as i32), sig);
        }
        if p.pid > 1 {
            let _ = kill(Pid::from_raw(p.pid as i32), sig);
        }
    }
}

/// Stops every live process below stallwarden: SIGTERM, up to `grace` for
/// them to go, then SIGKILL and up to `confirm` more. Reaps as it waits.
/// Returns the processes still alive at the end (none, normally).
pub(crate) fn stop_all(grace: Duration, confirm: Duration) -> Vec<ProcessName> {
    let live = |t: &[Proc]| t.iter().filter(|p| !p.zombie).cloned().collect::<Vec<_>>();
    let left = live(&our_tree(None));
    if left.is_empty() {
        reap_orphans(None);
        return Vec::new();
    }
    signal_all(&left, Signal::SIGTERM);
    let left = wait_gone(grace);
    if left.is_empty() {
        return Vec::new();
    }
    signal_all(&left, Signal::SIGKILL);
    wait_gone(confirm).iter().map(Proc::named).collect()
}

/// Stops what is left of the command's own process group when its members
/// are not below stallwarden (no subreaper): SIGTERM, `grace`, SIGKILL,
/// `confirm`. A group with no member is never signalled, since its id may
/// then be reused.
pub(crate) fn stop_group(pgid: u32, grace: Duration, confirm: Duration) {
    use stallwarden::sinks::process::{group_members, wait_group_gone, KillOutcome};
    // No such group: nothing to read `/proc` for (the usual case, issue 22).
    if killpg(Pid::from_raw(pgid as i32), None) == Err(nix::errno::Errno::ESRCH) {
        return;
    }
    if group_members(pgid).map_or(true, |m| m.is_empty()) {
        return;
    }
    let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGTERM);
    let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGCONT);
    if let KillOutcome::Confirmed { .. } = wait_group_gone(pgid, grace) {
        return;
    }
    let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
    if let KillOutcome::Unconfirmed { left } = wait_group_gone(pgid, confirm) {
        tracing::error!(
            pgid,
            ?left,
            "cleanup unconfirmed: the command's group still runs"
        );
    }
}

/// Waits up to `bound` for stallwarden to have no live descendant, reaping
/// zombies meanwhile; returns what is still alive.
pub(crate) fn wait_gone(bound: Duration) -> Vec<Proc> {
    let until = stallwarden::instant_after(bound);
    // Short at first (most processes go at once on SIGTERM), longer while
    // one takes its time: the look costs little (the tree alone), and
    // fewer looks cost less still (issue 22).
    let mut pause = Duration::from_millis(1);
    loop {
        reap_orphans(None);
        let left: Vec<Proc> = our_tree(None).into_iter().filter(|p| !p.zombie).collect();
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(pause.min(until.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(POLL);
    }
}

/// Names the live processes below stallwarden after the command was reaped.
pub(crate) fn leftovers() -> Vec<ProcessName> {
    our_tree(None)
        .iter()
        .filter(|p| !p.zombie)
        .map(Proc::named)
        .collect()
}

/// Carries cancel and kill past the command's process group (R8.6): each
/// process below stallwarden that is outside that group, and each escaped
/// session's group, gets the same signal the process sink sends the group.
///
/// The command's group is the action's pid: the task's process is spawned
/// as its group's leader.
#[derive(Debug)]
pub(crate) struct EscapedSignals;

impl Sink for EscapedSignals {
    fn on_event(&self, _: &stallwarden::Event) -> Result<(), SinkError> {
        Ok(())
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        let sig = match action.kind {
            ActionKind::Cancel { .. } => Signal::SIGTERM,
            ActionKind::Kill => Signal::SIGKILL,
            _ => return Ok(()),
        };
        let Some(pgid) = action.pid else {
            return Ok(());
        };
        let escaped: Vec<Proc> = our_tree(None)
            .into_iter()
            .filter(|p| p.pgid != pgid && !p.zombie)
            .collect();
        if !escaped.is_empty() {
            tracing::info!(
                signal = sig.as_str(),
                pids = ?escaped.iter().map(|p| p.pid).collect::<Vec<_>>(),
                "signalling processes that left the command's group"
            );
        }
        signal_all(&escaped, sig);
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Isolated
    }

    fn name(&self) -> &str {
        "escaped-signals"
    }
}

/// The command's sampled tree plus what escaped it (R8.6, R5.5): a second
/// sampler, rooted at stallwarden, sees the processes re-parented to us; the
/// ones outside the command's tree are added to its children, so a stall
/// names an escaped silent worker among the suspects. Both views are
/// cached by their samplers: reading them costs no `/proc` walk.
#[derive(Debug)]
pub(crate) struct WithEscaped {
    command: u32,
    tree: Arc<SampledChildren>,
    ours: ProcessSampler,
}

impl WithEscaped {
    /// Samples below stallwarden every `interval` and makes the merged view
    /// the task's child probe; `None` (the command's tree alone stays) when
    /// the sampler cannot start.
    pub(crate) fn attach(
        command: u32,
        tree: Arc<SampledChildren>,
        interval: Duration,
        recorder: &Recorder,
    ) -> Option<Arc<WithEscaped>> {
        // No recorder: stallwarden's own CPU is not the command's progress.
        let ours = ProcessSampler::spawn(std::process::id(), interval, None).ok()?;
        let merged = Arc::new(WithEscaped {
            command,
            tree,
            ours,
        });
        recorder.set_children_probe(Arc::clone(&merged) as Arc<dyn ChildProbe>);
        Some(merged)
    }
}

impl ChildProbe for WithEscaped {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        self.merge(self.tree.children())
    }

    /// R8.13: a fresh look at the command and its tree, plus the escaped.
    fn verdict_children(&self) -> Option<Vec<ChildInfo>> {
        self.merge(self.tree.verdict_children())
    }
}

impl WithEscaped {
    fn merge(&self, tree: Option<Vec<ChildInfo>>) -> Option<Vec<ChildInfo>> {
        let Some(all) = self.ours.children() else {
            return tree;
        };
        let mut out = tree.unwrap_or_default();
        let known: std::collections::HashSet<u32> = out.iter().map(|c| c.pid).collect();
        out.extend(
            all.into_iter()
                .filter(|c| c.pid != self.command && !known.contains(&c.pid)),
        );
        Some(out)
    }
}

/// Reaps re-parented orphans every `every` on a thread of its own until
/// dropped, so none stays a zombie while the command runs (R8.6).
pub(crate) struct OrphanReaper {
    stop: Option<std::sync::mpsc::Sender<()>>,
}

impl OrphanReaper {
    /// Starts reaping, leaving `command` (the pid another thread waits on)
    /// alone.
    pub(crate) fn spawn(command: u32, every: Duration) -> OrphanReaper {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let _ = std::thread::Builder::new()
            .name("stallwarden-reap".into())
            .spawn(move || loop {
                reap_orphans(Some(command));
                if !matches!(
                    rx.recv_timeout(every),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                ) {
                    return;
                }
            });
        OrphanReaper { stop: Some(tx) }
    }
}

impl Drop for OrphanReaper {
    fn drop(&mut self) {
        drop(self.stop.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line as the kernel writes it (22 fields and more).
    fn line(comm: &str, state: char, ppid: u32, pgrp: u32) -> String {
        format!("42 ({comm}) {state} {ppid} {pgrp} 42 0 -1 4194560 0 0 0 0 1 2 0 0 20 0 1 0 77 0 0")
    }

    #[test]
    fn stat_line_with_parens_in_the_name_parses() {
        // R10.6: the core's one parser; a hostile name (`a) b (c`) stays
        // the name.
        let p = Proc::parse(&line("a) b (c", 'S', 7, 40)).unwrap();
        assert_eq!(
            (p.pid, p.name.as_str(), p.ppid, p.pgid),
            (42, "a) b (c", 7, 40)
        );
        assert!(!p.zombie);
        assert!(Proc::parse(&line("x", 'Z', 1, 2)).unwrap().zombie);
        assert!(Proc::parse(&line("x", 'X', 1, 2)).unwrap().zombie);
        assert_eq!(Proc::parse("42 (trunc"), None);
        assert_eq!(Proc::parse("x (y) S 1 2"), None);
    }

    #[test]
    fn descendants_follow_parents_and_survive_cycles() {
        let p = |pid, ppid| Proc {
            pid,
            name: "p".into(),
            zombie: false,
            ppid,
            pgid: pid,
        };
        let t = [
            p(10, 1),
            p(11, 10),
            p(12, 11),
            p(13, 1),
            p(14, 14),
            p(15, 16),
            p(16, 15),
        ];
        let mut d: Vec<u32> = descendants_in(&t, 10).iter().map(|p| p.pid).collect();
        d.sort_unstable();
        assert_eq!(d, [11, 12]);
        assert!(descendants_in(&t, 15).iter().any(|p| p.pid == 16));
    }
}
