//! Nothing lost (R10.3, R3.8, R6.2) under concurrency: a thousand tasks
//! started, fed, cancelled, paused, finished and abandoned by several
//! threads at once while another thread moves a virtual clock, with random
//! choices from a seeded generator. Every started task must end with
//! exactly one `finished`, last; every cancel and kill must reach a
//! process-like sink; and every sink must see each task's events and
//! actions in emission order — the order the inline [`RecordingSink`]
//! saw them, since inline delivery happens in outbox order — losing at most
//! heartbeats, and those only to a sink that fell behind.
//!
//! One more test does the same with real processes and the real
//! [`ProcessSink`]: every cancel becomes a SIGTERM, every kill a SIGKILL.
//!
//! `STALLWARDEN_SEED` picks the seed (printed on failure); the long mode,
//! `cargo test --test nothing_lost -- --ignored`, runs twenty thousand tasks
//! over several seeds.

use std::collections::HashMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use stallwarden::sinks::process::{GroupSignal, ProcessSink};
use stallwarden::{
    Action, ActionKind, Delivered, Event, EventKind, Guard, ManualClock, Outcome, Profile,
    RecordingSink, Sink, SinkError, TaskHandle, TaskId,
};

mod common;

/// Generous bound for real processes and for isolated sinks catching up.
const BOUND: Duration = Duration::from_secs(60);
const DEFAULT_SEED: u64 = 0x5eed_2026_0101;

/// SplitMix64: small, seeded, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

fn seed() -> u64 {
    std::env::var("STALLWARDEN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED)
}

/// A recorder delivered on a thread of its own, as the process sink is:
/// the stand-in that must receive every cancel and kill.
#[derive(Clone, Debug, Default)]
struct ProcessLike(RecordingSink);

impl Sink for ProcessLike {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.0.on_event(event)
    }
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        self.0.on_action(action)
    }
    fn name(&self) -> &str {
        "process-like"
    }
}

/// An isolated recorder that blocks on its first call until released, so
/// its queue backs up with the whole run: heartbeats to it may be
/// coalesced, nothing else may be dropped (R6.2).
#[derive(Clone, Debug, Default)]
struct Gated {
    rec: RecordingSink,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl Gated {
    fn release(&self) {
        *self.open.0.lock() = true;
        self.open.1.notify_all();
    }
    fn wait_open(&self) {
        let mut open = self.open.0.lock();
        while !*open {
            self.open.1.wait(&mut open);
        }
    }
}

impl Sink for Gated {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.wait_open();
        self.rec.on_event(event)
    }
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        self.wait_open();
        self.rec.on_action(action)
    }
    fn name(&self) -> &str {
        "gated"
    }
}

fn task_of(d: &Delivered) -> TaskId {
    match d {
        Delivered::Event(e) => e.task,
        Delivered::Action(a) => a.task,
    }
}

fn by_task(all: Vec<Delivered>) -> HashMap<TaskId, Vec<Delivered>> {
    let mut map: HashMap<TaskId, Vec<Delivered>> = HashMap::new();
    for d in all {
        map.entry(task_of(&d)).or_default().push(d);
    }
    map
}

fn is_heartbeat(d: &Delivered) -> bool {
    matches!(d, Delivered::Event(e) if matches!(e.kind, EventKind::Heartbeat { .. }))
}

fn type_of(d: &Delivered) -> &'static str {
    match d {
        Delivered::Event(e) => e.kind.type_name(),
        Delivered::Action(a) => match a.kind {
            ActionKind::Cancel { .. } => "action:cancel",
            ActionKind::Kill => "action:kill",
            _ => "action:other",
        },
    }
}

/// Checks that `got` is `truth` with some heartbeats left out and nothing
/// else changed, moved or added; returns how many heartbeats were left out.
fn missing_only_heartbeats(truth: &[Delivered], got: &[Delivered]) -> Result<usize, String> {
    let mut skipped = 0;
    let mut g = got.iter().peekable();
    for t in truth {
        if g.peek() == Some(&t) {
            g.next();
        } else if is_heartbeat(t) {
            skipped += 1;
        } else {
            return Err(format!(
                "{} missing or out of order; truth {:?}, got {:?}",
                type_of(t),
                truth.iter().map(type_of).collect::<Vec<_>>(),
                got.iter().map(type_of).collect::<Vec<_>>()
            ));
        }
    }
    match g.next() {
        None => Ok(skipped),
        Some(extra) => Err(format!("an extra {} was delivered", type_of(extra))),
    }
}

/// What a worker did to a task, to check the task's end against.
#[derive(Debug)]
struct Ending {
    name: String,
    outcome: Outcome,
}

/// One worker: starts its share of tasks and applies random operations to
/// its live ones until every task it started has ended.
fn worker(guard: Guard, w: usize, tasks: usize, seed: u64, ops: Arc<AtomicU64>) -> Vec<Ending> {
    let mut rng = Rng(seed ^ (w as u64).wrapping_mul(0xa076_1d64_78bd_642f));
    struct Live {
        name: String,
        handle: TaskHandle,
        call: Option<String>,
        paused: bool,
    }
    let mut live: Vec<Live> = Vec::new();
    let mut ended = Vec::new();
    let mut started = 0;
    let mut calls = 0u64;
    while started < tasks || !live.is_empty() {
        ops.fetch_add(1, Ordering::Relaxed);
        if started < tasks && (live.is_empty() || rng.below(3) == 0) {
            let profile = Profile::default()
                .idle(rng.millis(2_000, 60_000))
                .execution(rng.millis(5_000, 90_000))
                .grace_period(rng.millis(0, 3_000))
                .terminate_after(rng.below(3) as u32)
                .heartbeat_interval(match rng.below(3) {
                    0 => None,
                    _ => Some(rng.millis(1_000, 5_000)),
                })
                .long_running_after(rng.millis(1_000, 20_000));
            let name = format!("w{w}-t{started}");
            // A made-up pid: actions name it, the process-like sink records it.
            let pid = 1_000_000 + (w * tasks + started) as u32;
            let handle = guard.start_process(name.clone(), profile, pid).unwrap();
            live.push(Live {
                name,
                handle,
                call: None,
                paused: false,
            });
            started += 1;
            continue;
        }
        let i = rng.below(live.len() as u64) as usize;
        let t = &mut live[i];
        // Errors are expected (a cancelled task refuses a pause, say);
        // what matters is that nothing panics and nothing is lost.
        match rng.below(100) {
            0..=29 => t.handle.output(1 + rng.below(4096), rng.below(8)),
            30..=37 => t.handle.heartbeat(),
            38..=44 => t.handle.argument_delta(),
            45..=51 => match t.call.take() {
                Some(call) => {
                    let _ = t
                        .handle
                        .tool_finished(&call, stallwarden::CallOutcome::Success);
                }
                None => {
                    calls += 1;
                    let call = format!("call-{calls}");
                    if t.handle.tool_started(&call, "bash").is_ok() {
                        t.call = Some(call);
                    }
                }
            },
            52..=54 => {
                let _ = t.handle.cancel("worker cancel");
            }
            55..=56 => {
                let _ = guard.cancel(&t.name, "cancel by name");
            }
            57..=58 => {
                let _ = t.handle.trigger("worker fault");
            }
            59..=61 => {
                let _ = if t.paused {
                    t.handle.resume()
                } else {
                    t.handle.pause()
                };
                t.paused = !t.paused;
            }
            62..=64 => {
                t.handle.progress(rng.below(100) as f64);
            }
            65..=71 => {
                let t = live.swap_remove(i);
                let (outcome, code) = match rng.below(3) {
                    0 => (Outcome::Completed, 0),
                    1 => (Outcome::Failed, 1 + rng.below(100) as i32),
                    _ => (Outcome::Cancelled, 0),
                };
                t.handle.finish(outcome, Some(code), None).unwrap();
                ended.push(Ending {
                    name: t.name,
                    outcome,
                });
            }
            72..=73 => {
                let t = live.swap_remove(i);
                drop(t.handle); // R3.9: abandoned
                ended.push(Ending {
                    name: t.name,
                    outcome: Outcome::Abandoned,
                });
            }
            _ => std::thread::yield_now(),
        }
    }
    ended
}

/// Runs `tasks` tasks over `workers` threads with a clock thread, then
/// checks every sink against the inline truth.
fn run_concurrent(tasks: usize, workers: usize, seed: u64) {
    let clock = ManualClock::new();
    let truth = RecordingSink::new();
    let process_like = ProcessLike::default();
    let gated = Gated::default();
    let guard = Guard::builder()
        .clock(clock)
        .sink(truth.clone())
        .sink(process_like.clone())
        .sink(gated.clone())
        .build();
    let ops = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));

    // The clock thread: a random step after every few worker operations,
    // so virtual time moves at the pace of the work.
    let ticker = {
        let (guard, ops, done) = (guard.clone(), Arc::clone(&ops), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut rng = Rng(seed.rotate_left(17));
            let mut advances = 0u64;
            while !done.load(Ordering::SeqCst) {
                let seen = ops.load(Ordering::Relaxed);
                guard.advance(rng.millis(0, 400));
                advances += 1;
                while ops.load(Ordering::Relaxed) < seen + 8 && !done.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            }
            advances
        })
    };
    let per = tasks / workers;
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (guard, ops) = (guard.clone(), Arc::clone(&ops));
            std::thread::spawn(move || worker(guard, w, per, seed, ops))
        })
        .collect();
    let endings: Vec<Ending> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("a worker panicked"))
        .collect();
    done.store(true, Ordering::SeqCst);
    let advances = ticker.join().expect("the clock thread panicked");
    assert_eq!(endings.len(), per * workers);

    // R3.8: nothing is dispatched about a finished task, however far the
    // clock moves.
    let before = truth.delivered().len();
    guard.advance(Duration::from_secs(3600));
    assert_eq!(
        truth.delivered().len(),
        before,
        "seed {seed}: a tick after finish"
    );
    assert!(!guard.is_busy());

    gated.release();
    assert!(
        guard.flush(BOUND),
        "seed {seed}: isolated sinks did not catch up"
    );

    let truth_by = by_task(truth.delivered());
    let like_by = by_task(process_like.0.delivered());
    let gated_by = by_task(gated.rec.delivered());
    let names: HashMap<String, TaskId> = truth
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Started { .. }))
        .map(|e| (e.name.to_string(), e.task))
        .collect();
    assert_eq!(names.len(), endings.len(), "seed {seed}: started events");

    let (mut cancels, mut kills, mut heartbeats) = (0, 0, 0);
    let (mut lost_fast, mut lost_gated) = (0, 0);
    for ending in &endings {
        let ctx = format!("seed {seed}, task {}", ending.name);
        let id = names[&ending.name];
        let seq = &truth_by[&id];
        let types: Vec<_> = seq.iter().map(type_of).collect();
        // Every started task ends with exactly one `finished`, last (R3.8).
        assert_eq!(types.first(), Some(&"started"), "{ctx}: {types:?}");
        assert_eq!(types.last(), Some(&"finished"), "{ctx}: {types:?}");
        assert_eq!(
            types.iter().filter(|t| **t == "finished").count(),
            1,
            "{ctx}: {types:?}"
        );
        // No heartbeat between a cancel and the finish (R3.8); at most one
        // long_running (R3.6); one cancel and at most one kill (R3.5).
        let cancelling = types.iter().position(|t| *t == "cancelling");
        if let Some(c) = cancelling {
            assert!(
                !types[c..].contains(&"heartbeat"),
                "{ctx}: heartbeat after cancelling: {types:?}"
            );
        }
        assert!(types.iter().filter(|t| **t == "long_running").count() <= 1);
        let count = |ty: &str| types.iter().filter(|t| **t == ty).count();
        assert!(count("cancelling") <= 1, "{ctx}: {types:?}");
        assert_eq!(
            count("cancelling"),
            count("action:cancel"),
            "{ctx}: {types:?}"
        );
        assert_eq!(count("killed"), count("action:kill"), "{ctx}: {types:?}");
        cancels += count("action:cancel");
        kills += count("action:kill");
        heartbeats += count("heartbeat");
        // The end is what the worker did, except that cancelled work ends
        // as cancelled whatever the runner said.
        let Some(Delivered::Event(last)) = seq.last() else {
            unreachable!()
        };
        let EventKind::Finished { outcome, .. } = last.kind else {
            unreachable!()
        };
        let expected = if cancelling.is_some() {
            Outcome::Cancelled
        } else {
            ending.outcome
        };
        assert_eq!(outcome, expected, "{ctx}: {types:?}");

        // Every sink saw the same sequence, in emission order. The
        // process-like sink kept up; the gated one may have lost heartbeats.
        let like = like_by.get(&id).map_or(&[][..], Vec::as_slice);
        let lost = missing_only_heartbeats(seq, like).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let got_actions = like
            .iter()
            .filter(|d| matches!(d, Delivered::Action(_)))
            .count();
        assert_eq!(
            got_actions,
            count("action:cancel") + count("action:kill"),
            "{ctx}: a cancel or kill did not reach the process-like sink"
        );
        lost_fast += lost;
        let gated_seq = gated_by.get(&id).map_or(&[][..], Vec::as_slice);
        lost_gated +=
            missing_only_heartbeats(seq, gated_seq).unwrap_or_else(|e| panic!("{ctx}, gated: {e}"));
    }
    eprintln!(
        "seed {seed}: {} tasks, {advances} clock steps, {cancels} cancels, {kills} kills, \
         {heartbeats} heartbeats, coalesced {lost_fast} to the process-like sink and \
         {lost_gated} to the gated one",
        endings.len()
    );
    // The run must have exercised what it claims to.
    assert!(cancels > tasks / 20, "seed {seed}: only {cancels} cancels");
    assert!(kills > 0, "seed {seed}: no kills");
    assert!(
        heartbeats > 200,
        "seed {seed}: only {heartbeats} heartbeats"
    );
    // The gated sink was blocked for the whole run: its heartbeats were
    // coalesced (and, per the checks above, nothing else was dropped).
    assert!(
        lost_gated > 0,
        "seed {seed}: nothing coalesced to a blocked sink"
    );
}

// R10.3, R3.8, R6.2: 1 000 tasks, four threads doing random signals,
// cancels, pauses, finishes and drops, one thread moving the clock.
#[test]
fn a_thousand_concurrent_tasks_each_end_once_and_every_cancel_arrives_in_order() {
    run_concurrent(1_000, 4, seed());
}

// The long mode: twenty thousand tasks, eight threads, five seeds.
#[test]
#[ignore = "long soak (about a minute); run with --ignored"]
fn soak_twenty_thousand_tasks_over_five_seeds() {
    for k in 0..5u64 {
        run_concurrent(20_000, 8, seed().wrapping_add(k));
    }
}

/// Polls until process `pid` runs `name` (its `exec` happened, so any
/// `trap` before it is in force), or the bound passes.
fn wait_exec(pid: u32, name: &str) {
    let became = common::wait::until(pid, BOUND, Duration::from_millis(5), || {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == name)
            .then_some(())
    });
    assert!(became.is_some(), "process {pid} never became {name}");
}

/// SIGKILLs a process group on drop, so a failing test leaves nothing.
struct GroupKiller(u32);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        // SAFETY: plain syscall on a group this test created (pid > 1).
        unsafe { libc::kill(-(self.0 as i32), libc::SIGKILL) };
    }
}

// R10.3, R3.5, R6.4: eight real processes, cancelled concurrently in every
// way there is — a stall, a cancel by name, a cancel through the handle, a
// self-reported fault — from several threads: every cancel becomes a
// SIGTERM to the right group, and every one that ignores SIGTERM is
// SIGKILLed after the grace period; each task ends with one `finished`.
#[test]
fn every_cancel_reaches_real_processes_through_the_process_sink() {
    const N: usize = 8;
    let clock = ManualClock::new();
    let procs = ProcessSink::new();
    let truth = RecordingSink::new();
    let guard = Guard::builder()
        .clock(clock)
        .sink(procs.clone())
        .sink(truth.clone())
        .build();
    let grace = Duration::from_secs(5);
    let mut killers = Vec::new();
    let mut runners = Vec::new();
    let mut handles = Vec::new();
    // Each runner says which task it settled, once it has.
    let (settled_tx, settled) = std::sync::mpsc::channel::<usize>();
    for i in 0..N {
        let ignores_term = i % 2 == 1;
        let script = if ignores_term {
            "trap '' TERM; exec sleep 300"
        } else {
            "exec sleep 300"
        };
        let child = Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        killers.push(GroupKiller(child.id()));
        wait_exec(child.id(), "sleep");
        // p6 and p7 are left to stall; the others are cancelled first.
        let idle = if i >= 6 { 1 } else { 3600 };
        let profile = Profile::default()
            .idle(Duration::from_secs(idle))
            .grace_period(grace)
            .heartbeat_interval(None);
        let task = guard
            .start_process(format!("p{i}"), profile, child.id())
            .unwrap();
        handles.push((child.id(), ignores_term, task.recorder()));
        // The runner: waits on its child (reaping is its job) and settles
        // the task with how the child ended.
        let settled_tx = settled_tx.clone();
        runners.push(std::thread::spawn(move || {
            let mut child = child;
            let status = child.wait().unwrap();
            task.finish(Outcome::Failed, status.code(), status.signal())
                .unwrap();
            let _ = settled_tx.send(i);
            status
        }));
    }
    guard.advance(Duration::from_secs(1)); // p6 and p7 stall and cancel
                                           // Cancels from several threads at once.
    std::thread::scope(|s| {
        for (i, (_, _, rec)) in handles.iter().enumerate().take(6) {
            let guard = guard.clone();
            s.spawn(move || match i % 3 {
                0 => guard.cancel(&format!("p{i}"), "cancel by name").unwrap(),
                1 => rec.cancel("cancel through the handle").unwrap(),
                _ => rec.trigger("self-reported fault").unwrap(),
            });
        }
    });
    for (pgid, _, _) in &handles {
        let term = procs.wait_for(|r| r.pgid == *pgid && r.signal == GroupSignal::Term, BOUND);
        assert!(term.is_some(), "no SIGTERM report for group {pgid}");
    }
    // The cooperative ones are gone before the grace period ends (their
    // runners reaped them and settled their tasks)...
    let until = Instant::now() + BOUND;
    let mut ended = std::collections::HashSet::new();
    while !handles
        .iter()
        .enumerate()
        .all(|(i, (_, ignores, _))| *ignores || ended.contains(&i))
    {
        let left = until.saturating_duration_since(Instant::now());
        match settled.recv_timeout(left) {
            Ok(i) => ended.insert(i),
            Err(_) => panic!("SIGTERM did not end the cooperative processes"),
        };
    }
    // ...and the rest are SIGKILLed when it does.
    guard.advance(grace);
    let statuses: Vec<_> = runners.into_iter().map(|r| r.join().unwrap()).collect();
    // A runner's `finish` returns once its event is queued; another thread
    // draining at that moment delivers it to the inline sinks (the drain
    // hand-off, src/dispatch.rs). Flush waits for that drain to end.
    assert!(guard.flush(BOUND), "the sinks did not catch up");
    for (i, status) in statuses.into_iter().enumerate() {
        let (pgid, ignores_term, _) = handles[i];
        let want = if ignores_term {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        assert_eq!(status.signal(), Some(want), "p{i} (group {pgid})");
        let name = format!("p{i}");
        truth.assert_settled(&name);
        let types = truth.types_for(&name);
        assert!(types.contains(&"cancelling"), "{name}: {types:?}");
        assert_eq!(types.contains(&"killed"), ignores_term, "{name}: {types:?}");
        let Some(EventKind::Finished {
            outcome, signal, ..
        }) = truth
            .events()
            .into_iter()
            .filter(|e| *e.name == *name)
            .map(|e| e.kind)
            .last()
        else {
            unreachable!()
        };
        assert_eq!(outcome, Outcome::Cancelled, "{name}");
        assert_eq!(signal, Some(want), "{name}");
    }
    for (pgid, ignores_term, _) in &handles {
        if *ignores_term {
            let kill = procs.wait_for(|r| r.pgid == *pgid && r.signal == GroupSignal::Kill, BOUND);
            assert!(kill.is_some(), "no SIGKILL report for group {pgid}");
        }
    }
}
