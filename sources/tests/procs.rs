//! Process-table sampling (R5.5) against real process trees and against
//! fixture `/proc` text (tests/fixtures/proc). Real processes are spawned in
//! their own process group and killed with it when the test ends; waiting on
//! them is always a bounded poll.

mod common;

use common::Captured;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use proptest::prelude::*;
use stallwarden_sources::procs::{
    check_interval, sample_once, state_from_code, ProcStat, ProcTable, ProcessSampler, StatError,
    FULL_WALK_EVERY, MAX_CHILDREN,
};
use watchdog_core::{
    ChildInfo, ChildProbe, EventKind, Guard, KindSet, ManualClock, ProcState, Profile,
    RecordingSink, SignalKind,
};

const WAIT: Duration = Duration::from_secs(20);

/// A process group spawned for one test, killed (and reaped) on drop.
struct Group(Child);

impl Group {
    fn spawn(script: &str) -> Group {
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .spawn()
            .expect("sh spawns");
        Group(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// Samples until `done` holds, at most [`WAIT`]; a real process tree takes
/// real time to fork and exec, so this is the one place that sleeps.
fn sample_until(
    table: &mut ProcTable,
    root: u32,
    what: &str,
    done: impl Fn(&[ChildInfo]) -> bool,
) -> Vec<ChildInfo> {
    let start = Instant::now();
    loop {
        let children = table.sample(root).expect("/proc is readable").children;
        if done(&children) {
            return children;
        }
        assert!(
            start.elapsed() < WAIT,
            "gave up waiting for {what}: {children:#?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn names(children: &[ChildInfo]) -> Vec<&str> {
    children.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn two_background_sleeps_are_sampled_as_sleeping_children() {
    // R5.5: pid, executable name, state, start time, CPU.
    let group = Group::spawn("sleep 30 & sleep 30 & wait");
    let mut table = ProcTable::new();
    let kids = sample_until(&mut table, group.pid(), "two sleeping sleeps", |c| {
        names(c) == ["sleep", "sleep"] && c.iter().all(|c| c.state == ProcState::Sleeping)
    });
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for c in &kids {
        let started = c.started_unix_ms.expect("btime is readable");
        // A label from the wall clock: sanity bounds only, an hour wide.
        assert!(
            started.abs_diff(now_ms) < 3_600_000,
            "{c:?} vs now {now_ms}"
        );
        assert_ne!(c.pid, group.pid());
    }
    assert!(
        kids[0].started_unix_ms <= kids[1].started_unix_ms,
        "eldest first: {kids:?}"
    );
    let again = table.sample(group.pid()).unwrap().children;
    assert_eq!(names(&again), ["sleep", "sleep"]);
    assert!(
        again.iter().all(|c| c.cpu_delta_ms.is_some()),
        "seen twice, so deltas: {again:?}"
    );

    // A fresh table has nothing to compare with: deltas are absent.
    let once = sample_once(group.pid()).unwrap();
    assert_eq!(names(&once), ["sleep", "sleep"]);
    assert!(once.iter().all(|c| c.cpu_delta_ms.is_none()));
}

#[test]
fn a_child_that_exits_is_gone_from_the_next_sample() {
    let group = Group::spawn("sleep 30 & sleep 30 & wait");
    let mut table = ProcTable::new();
    let kids = sample_until(&mut table, group.pid(), "two sleeps", |c| {
        names(c) == ["sleep", "sleep"]
    });
    kill(Pid::from_raw(kids[0].pid as i32), Signal::SIGKILL).unwrap();
    // The shell's `wait` reaps it; after that it is in no sample.
    let left = sample_until(&mut table, group.pid(), "one sleep left", |c| c.len() == 1);
    assert_eq!(left[0].pid, kids[1].pid);
}

#[test]
fn an_unreaped_child_is_a_zombie_and_not_a_suspect() {
    // The exec'd `sleep 30` never waits, so `sleep 0.1` stays a zombie.
    let group = Group::spawn("sleep 0.1 & exec sleep 30");
    let mut table = ProcTable::new();
    let kids = sample_until(&mut table, group.pid(), "a zombie child", |c| {
        c.len() == 1 && c[0].state == ProcState::Zombie
    });
    assert_eq!(kids[0].name, "sleep");
    assert_eq!(kids[0].cpu_delta_ms, Some(0));
    assert!(
        !kids[0].is_suspect(),
        "a zombie uses no CPU by nature: {kids:?}"
    );
}

#[test]
fn a_stopped_child_is_reported_stopped_and_idle_children_become_suspects() {
    // R5.5: long-lived children with no CPU since the last sample are suspects.
    let group = Group::spawn("sleep 30 & wait");
    let mut table = ProcTable::new();
    let kids = sample_until(&mut table, group.pid(), "a sleep", |c| {
        names(c) == ["sleep"]
    });
    kill(Pid::from_raw(kids[0].pid as i32), Signal::SIGSTOP).unwrap();
    let kids = sample_until(&mut table, group.pid(), "a stopped sleep", |c| {
        c.len() == 1 && c[0].state == ProcState::Stopped
    });
    assert_eq!(kids[0].cpu_delta_ms, Some(0));
    assert!(kids[0].is_suspect());
}

#[test]
fn a_busy_tree_records_cpu_signals_on_the_task() {
    // R5.5 + R2.6: CPU used since the last sample is a `cpu` signal.
    let group = Group::spawn("while :; do :; done & wait");
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("busy", Profile::default()).unwrap();
    let sampler =
        ProcessSampler::spawn(group.pid(), Duration::from_secs(60), Some(task.recorder())).unwrap();
    let start = Instant::now();
    while task.last_signal(SignalKind::Cpu).is_none() {
        assert!(start.elapsed() < WAIT, "no cpu signal from a busy loop");
        std::thread::sleep(Duration::from_millis(20));
        sampler.sample_now();
    }
    let kids = sampler.children().unwrap();
    assert!(kids.iter().any(|c| c.cpu_ms > 0), "{kids:?}");
}

#[test]
fn sampler_thread_feeds_status_and_stall_suspects() {
    // R4.2: status shows the cached children; R3.1: the stall names them.
    let group = Group::spawn("sleep 30 & wait");
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let profile = Profile::default()
        .idle(Duration::from_secs(30))
        .heartbeat_interval(None);
    let task = guard.start_process("build", profile, group.pid()).unwrap();
    let sampler =
        ProcessSampler::spawn(group.pid(), Duration::from_secs(1), Some(task.recorder())).unwrap();
    assert_eq!(sampler.interval(), Duration::from_secs(1));

    // The thread's first sample lands without being asked for.
    let start = Instant::now();
    loop {
        let status = task.status().unwrap();
        if status
            .children
            .as_deref()
            .is_some_and(|c| names(c) == ["sleep"])
        {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "status never showed the sleep: {:?}",
            status.children
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // A second sample gives the deltas that make an idle child a suspect.
    let kids = sampler.sample_now().unwrap();
    assert!(kids[0].is_suspect(), "{kids:?}");

    guard.advance(Duration::from_secs(30));
    assert!(rec.wait_for("build", "stalled", WAIT));
    let stalled = rec.events().into_iter().find_map(|e| match e.kind {
        EventKind::Stalled { children, .. } => Some(children),
        _ => None,
    });
    let named = stalled.flatten().expect("the stall names children");
    assert!(named.iter().any(|c| c.name == "sleep"), "{named:?}");
    drop(sampler); // stops the thread, promptly
}

#[test]
fn intervals_outside_one_to_sixty_seconds_are_refused() {
    for bad in [
        Duration::ZERO,
        Duration::from_millis(999),
        Duration::from_secs(61),
    ] {
        let err = ProcessSampler::spawn(1, bad, None).unwrap_err().to_string();
        assert!(err.contains("1s..=60s"), "{err}");
        assert!(check_interval(bad).is_err());
    }
    for good in [
        Duration::from_secs(1),
        Duration::from_secs(15),
        Duration::from_secs(60),
    ] {
        assert_eq!(check_interval(good).unwrap(), good);
    }
}

#[test]
fn an_unreadable_table_leaves_children_absent() {
    // R5.5: a sampler that cannot read the table logs once; fields stay absent.
    let err = ProcTable::at("/nonexistent/proc")
        .sample(1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/proc"), "{err}");
    let sampler = ProcessSampler::with_table(
        ProcTable::at("/nonexistent/proc"),
        1,
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    assert_eq!(sampler.sample_now(), None);
    assert_eq!(sampler.children(), None);
}

#[test]
fn a_root_that_is_gone_has_no_children() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    assert_eq!(ProcTable::new().sample(pid).unwrap().children, []);
}

// R5.5: a one-off sample of a real process's tree finds its child (kills
// `sample_once -> Ok(vec![])`).
#[test]
fn a_one_off_sample_finds_a_real_child() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let found = sample_once(std::process::id())
        .unwrap()
        .iter()
        .any(|c| c.pid == child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(found, "the child is one of the test's descendants");
}

#[test]
fn at_most_24_children_eldest_first() {
    let group = Group::spawn("for i in $(seq 30); do sleep 30 & done; wait");
    let mut table = ProcTable::new();
    let start = Instant::now();
    let sample = loop {
        let s = table.sample(group.pid()).unwrap();
        if s.descendants == 30 && s.children.iter().all(|c| c.name == "sleep") {
            break s;
        }
        assert!(
            start.elapsed() < WAIT,
            "30 sleeps never showed: {}",
            s.descendants
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(sample.children.len(), MAX_CHILDREN);
    let starts: Vec<_> = sample.children.iter().map(|c| c.started_unix_ms).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
}

// ---- fixture /proc text ----

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn fixture_tree_names_states_wchan_and_order() {
    let mut table = ProcTable::at(fixture());
    let ticks = table.ticks_per_second();
    let sample = table.sample(100).unwrap();
    // 104 (truncated) and 106 (garbage) are skipped, 200 is not ours.
    assert_eq!(sample.descendants, 4);
    let got: Vec<_> = sample
        .children
        .iter()
        .map(|c| (c.pid, c.name.as_str(), c.state, c.wchan.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (102, "my (weird) prog) x", ProcState::Sleeping, None), // wchan "0"
            (105, "sleep", ProcState::Stopped, Some("do_signal_stop")),
            (101, "grep", ProcState::DiskWait, Some("io_schedule")),
            (103, "sh", ProcState::Zombie, None), // no wchan file
        ]
    );
    let grep = &sample.children[2];
    assert_eq!(grep.cpu_ms, 65 * 1000 / ticks);
    assert_eq!(
        grep.started_unix_ms,
        Some(1_700_000_000_000 + 2000 * 1000 / ticks)
    );
    assert!(grep.is_suspect(), "D state is always a suspect");
    assert_eq!(grep.cpu_delta_ms, None);
    assert_eq!(sample.cpu_delta_ms, None);
}

// R5.5: a running child is reported as running, not as "other" (kills the
// deleted `b'R'` arm of `state_from_code`).
#[test]
fn a_running_process_reads_as_running() {
    assert_eq!(state_from_code(b'R'), ProcState::Running);
    assert_eq!(state_from_code(b'S'), ProcState::Sleeping);
    assert_eq!(state_from_code(b'X'), ProcState::Other);
}

// R4.2/R5.5: `probe` hands out the sampler's own cached view, so a task the
// probe is attached to later shows the sampled children in its status
// (kills `ProcessSampler::probe -> Arc::new(Default::default())`).
#[test]
fn the_probe_is_the_samplers_cached_view() {
    let sampler =
        ProcessSampler::with_table(ProcTable::at(fixture()), 100, Duration::from_secs(60), None)
            .unwrap();
    let pids = |c: Option<Vec<watchdog_core::ChildInfo>>| {
        c.map(|c| c.iter().map(|c| c.pid).collect::<Vec<_>>())
    };
    let sampled = pids(sampler.sample_now());
    assert_eq!(sampled, Some(vec![102, 105, 101, 103]));
    let probe = sampler.probe();
    assert_eq!(pids(probe.children()), sampled);

    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("turn", Profile::default()).unwrap();
    task.recorder()
        .set_children_probe(Arc::clone(&probe) as Arc<dyn ChildProbe>);
    assert_eq!(pids(task.status().unwrap().children), sampled);
}

// R8.13/R5.5: a verdict looks at the tree afresh, root first, through the
// sampler itself or its cached view; the sampler names its root (kills
// `ProcessSampler::verdict_children -> Some(vec![])`,
// `Sampling::verdict -> Some(vec![])` and `ProcessSampler::pid -> 1`).
#[test]
fn a_verdict_looks_at_the_whole_tree_root_first() {
    let sampler =
        ProcessSampler::with_table(ProcTable::at(fixture()), 100, Duration::from_secs(60), None)
            .unwrap();
    assert_eq!(sampler.pid(), 100);
    let pids = |c: Option<Vec<watchdog_core::ChildInfo>>| {
        c.map(|c| c.iter().map(|c| c.pid).collect::<Vec<_>>())
    };
    let tree = Some(vec![100, 102, 105, 101, 103]);
    assert_eq!(pids(sampler.verdict_children()), tree);
    assert_eq!(pids(sampler.probe().verdict_children()), tree);
    // The periodic view has the children only.
    assert_eq!(pids(sampler.children()), Some(vec![102, 105, 101, 103]));
}

#[test]
fn fixture_second_sample_has_deltas_and_a_reused_pid_starts_over() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    let mut table = ProcTable::at(dir.path());
    let ticks = table.ticks_per_second();
    table.sample(100).unwrap();

    // grep used 100 more ticks of user time; 105's pid was reused by a new
    // process (a later start time) that already used 10 ticks.
    let stat = |pid: u32| dir.path().join(pid.to_string()).join("stat");
    let grep = std::fs::read_to_string(stat(101))
        .unwrap()
        .replacen(" 40 25 ", " 140 25 ", 1);
    std::fs::write(stat(101), grep).unwrap();
    let reused = std::fs::read_to_string(stat(105))
        .unwrap()
        .replacen(" 0 0 0 0 20 ", " 10 0 0 0 20 ", 1)
        .replacen(" 1500 ", " 5000 ", 1);
    std::fs::write(stat(105), reused).unwrap();

    let sample = table.sample(100).unwrap();
    let by_pid = |pid| sample.children.iter().find(|c| c.pid == pid).unwrap();
    assert_eq!(by_pid(101).cpu_delta_ms, Some(100 * 1000 / ticks));
    assert_eq!(by_pid(102).cpu_delta_ms, Some(0));
    assert!(by_pid(102).is_suspect());
    assert_eq!(
        by_pid(105).cpu_delta_ms,
        None,
        "a reused pid is a new process"
    );
    assert_eq!(sample.children.last().unwrap().pid, 105, "now the youngest");
    assert_eq!(
        sample.cpu_delta_ms,
        Some(100 * 1000 / ticks + 10 * 1000 / ticks)
    );
}

/// A copy of the fixture tree, and a way to rewrite part of one of its
/// stat lines (`from` must occur in it).
fn fixture_copy() -> (tempfile::TempDir, impl Fn(u32, &str, &str)) {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    let root = dir.path().to_path_buf();
    let edit = move |pid: u32, from: &str, to: &str| {
        let path = root.join(pid.to_string()).join("stat");
        let line = std::fs::read_to_string(&path).unwrap();
        assert!(line.contains(from), "{from:?} not in {line:?}");
        std::fs::write(&path, line.replacen(from, to, 1)).unwrap();
    };
    (dir, edit)
}

#[test]
fn a_periodic_sample_asks_only_the_suspects_what_they_are_blocked_on() {
    // R5.5 and R8.13: a periodic sample asks what a process is blocked on
    // only of a suspect (in D state, or asleep with no CPU since the last
    // sample); a look taken for a verdict asks every process. The fixture
    // has no `syscall` files, so an asked process is described as such.
    let (dir, edit) = fixture_copy();
    let mut table = ProcTable::at(dir.path());
    let asked = |sample: &stallwarden_sources::procs::TreeSample| -> Vec<u32> {
        let root = sample.root.iter();
        let mut p: Vec<u32> = root
            .chain(&sample.children)
            .filter(|c| c.blocked_on.is_some())
            .map(|c| c.pid)
            .collect();
        p.sort_unstable();
        p
    };
    // First sample, no CPU known yet: only grep, in D state.
    assert_eq!(asked(&table.sample(100).unwrap()), [101]);
    // grep (D) and 102 used CPU; bash, the root, used none: a suspect.
    edit(101, " 40 25 ", " 140 25 ");
    edit(102, " 0 0 0 0 20 ", " 5 0 0 0 20 ");
    assert_eq!(asked(&table.sample(100).unwrap()), [100, 101]);
    // A look asks everyone that can be blocked (not the zombie 103 or the
    // stopped 105).
    assert_eq!(asked(&table.peek(100).unwrap()), [100, 101, 102]);
    // Without blocked-on, no one is asked, even by a look.
    let look = ProcTable::at(dir.path())
        .without_blocked_on()
        .peek(100)
        .unwrap();
    assert_eq!((look.descendants, asked(&look)), (4, vec![]));
}

#[test]
fn outside_a_system_call_a_running_process_is_on_a_cpu_and_a_sleeping_one_is_not() {
    // R8.13: `/proc/PID/syscall` says `running` or `-1 SP PC` for a task
    // that is in no system call; only one in state R is running on a CPU,
    // one asleep there (a page fault, say) is blocked outside a call.
    let (dir, edit) = fixture_copy();
    edit(102, ") S 100 ", ") R 100 ");
    std::fs::write(dir.path().join("102/syscall"), "running\n").unwrap();
    std::fs::write(
        dir.path().join("100/syscall"),
        "-1 0x7ffc9d2e0 0x7f3a1b2c0\n",
    )
    .unwrap();
    let look = ProcTable::at(dir.path()).peek(100).unwrap();
    let on = |pid: u32| {
        let all = look.root.iter().chain(&look.children);
        all.clone()
            .find(|c| c.pid == pid)
            .unwrap()
            .blocked_on
            .clone()
            .unwrap()
    };
    assert_eq!(on(102), "running on a CPU");
    assert!(
        on(100).starts_with("blocked outside a system call"),
        "{}",
        on(100)
    );
}

#[test]
fn a_child_gone_since_the_last_sample_is_not_counted_twice() {
    // R5.11: the shell 103 used 2 ticks and exits; its parent grep reaps it
    // and its children times grow by those 2 ticks. They were counted when
    // 103 was sampled: the tree used nothing new.
    let (dir, edit) = fixture_copy();
    let mut table = ProcTable::at(dir.path());
    table.sample(100).unwrap();
    std::fs::remove_dir_all(dir.path().join("103")).unwrap();
    edit(101, " 40 25 0 0 20 ", " 40 25 2 0 20 ");
    assert_eq!(table.sample(100).unwrap().cpu_delta_ms, Some(0));
}

#[test]
fn a_table_moved_to_another_root_starts_over() {
    // R5.5: what samples of one tree learned (who is outside it, the pid
    // counter, CPU totals) says nothing about another tree: 100's children
    // were all outsiders of 200's tree, and the counter did not move.
    let (dir, _) = fixture_copy();
    std::fs::write(dir.path().join("loadavg"), "0.00 0.00 0.00 1/90 300\n").unwrap();
    let mut table = ProcTable::at(dir.path());
    assert!(table.sample(200).unwrap().children.is_empty());
    let sample = table.sample(100).unwrap();
    assert_eq!(names(&sample.children).len(), 4);
    assert_eq!(sample.cpu_delta_ms, None, "no earlier sample of this tree");
}

#[test]
fn outsiders_are_read_again_only_when_the_pid_counter_passes_them() {
    // The cost cut of ProcTable: a pid outside the tree is not re-read until
    // the kernel's pid counter (loadavg's last field) passes it, or until the
    // next full walk.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    let set_last_pid = |pid: u32| {
        std::fs::write(
            dir.path().join("loadavg"),
            format!("0.00 0.00 0.00 1/90 {pid}\n"),
        )
        .unwrap();
    };
    let adopt = |pid: u32, start: u64| {
        // A new process under the root, at `pid`.
        let line = format!("{pid} (new) S 100 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n");
        std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
        std::fs::write(dir.path().join(pid.to_string()).join("stat"), line).unwrap();
    };
    let pids = |t: &mut ProcTable| -> Vec<u32> {
        let mut p: Vec<u32> = t
            .sample(100)
            .unwrap()
            .children
            .iter()
            .map(|c| c.pid)
            .collect();
        p.sort_unstable();
        p
    };
    set_last_pid(200);
    let mut table = ProcTable::at(dir.path());
    assert_eq!(pids(&mut table), [101, 102, 103, 105]);

    // A brand-new pid the counter passed is read.
    set_last_pid(301);
    adopt(301, 6000);
    assert_eq!(pids(&mut table), [101, 102, 103, 105, 301]);

    // Outsider 200 reused after the counter wrapped past it: read again.
    set_last_pid(250);
    adopt(200, 7000);
    assert_eq!(pids(&mut table), [101, 102, 103, 105, 200, 301]);

    // Outsider 106 "reused" with no counter movement (impossible in a real
    // kernel short of a full wrap): missed until the next full walk.
    adopt(106, 8000);
    let mut samples = 0;
    while !pids(&mut table).contains(&106) {
        samples += 1;
        assert!(
            samples < FULL_WALK_EVERY,
            "no full walk after {samples} samples"
        );
    }
    assert!(samples > 0, "an outsider was re-read without cause");
}

// R9.4/R5.5: a walk of the table re-reads everything exactly every
// FULL_WALK_EVERY samples, so an outsider's pid reused with no counter
// movement shows at the next full walk, not one sample later (kills
// `+ with *` in `ProcTable::read_table`'s `since_full_walk + 1`, which
// stretched the period to FULL_WALK_EVERY + 1).
#[test]
fn the_full_walk_comes_every_full_walk_every_samples_exactly() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    std::fs::write(dir.path().join("loadavg"), "0.00 0.00 0.00 1/90 300\n").unwrap();
    let mut table = ProcTable::at(dir.path());
    let has =
        |t: &mut ProcTable, pid: u32| t.sample(100).unwrap().children.iter().any(|c| c.pid == pid);
    // Sample 1 is a full walk (no counter seen before); 106's stat is
    // garbage then, so it is listed as an outsider.
    assert!(!has(&mut table, 106));
    // 106 "reused" under the root with the counter unmoved.
    std::fs::write(
        dir.path().join("106/stat"),
        "106 (new) S 100 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 8000 0 0\n",
    )
    .unwrap();
    for n in 2..=FULL_WALK_EVERY {
        assert!(!has(&mut table, 106), "sample {n} is not a full walk");
    }
    assert!(
        has(&mut table, 106),
        "sample {} is the next full walk",
        FULL_WALK_EVERY + 1
    );
}

#[test]
fn the_pid_counter_passing_forward_and_wrapping_round_decides_which_outsiders_are_read() {
    // R9.4's cost cut, both ways the counter can move. Between two samples
    // the kernel handed out the pids in (before, now], or, once it wrapped
    // round, those above `before` and those up to `now`: only an outsider
    // in that range can have been reused, so only it is read again. The
    // counter's own pid at the last sample was seen then and is not.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    let at = |pid: u32, ppid: u32, start: u64| {
        let line =
            format!("{pid} (p{pid}) S {ppid} 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n");
        std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
        std::fs::write(dir.path().join(pid.to_string()).join("stat"), line).unwrap();
    };
    let counter = |pid: u32| {
        let line = format!("0.00 0.00 0.00 1/90 {pid}\n");
        std::fs::write(dir.path().join("loadavg"), line).unwrap();
    };
    let mut table = ProcTable::at(dir.path()).walk_only();
    let mut pids = || -> Vec<u32> {
        let mut p: Vec<_> = table
            .sample(100)
            .unwrap()
            .children
            .iter()
            .map(|c| c.pid)
            .collect();
        p.sort_unstable();
        p
    };
    at(250, 1, 4000);
    at(300, 1, 4100);
    counter(106);
    assert_eq!(pids(), [101, 102, 103, 105]);

    // Forward, 106 -> 250: 200 and 250 are in the range and read again
    // (200 is now a child of the root); 106, the counter's last pid, is not.
    at(106, 100, 8000);
    at(200, 100, 7000);
    counter(250);
    assert_eq!(pids(), [101, 102, 103, 105, 200]);

    // Wrapped, 250 -> 150: 300 (above 250) and 106 (up to 150) are read;
    // 250, the counter's last pid, is not, though it is a child now too.
    at(250, 100, 9000);
    at(300, 100, 9100);
    counter(150);
    assert_eq!(pids(), [101, 102, 103, 105, 106, 200, 300]);
}

#[test]
fn a_children_list_longer_than_the_read_buffer_is_read_to_its_end() {
    // R5.5, R9.4: a fork server or a build with hundreds of children lists
    // them in one file, longer than the table's first 1 KiB read; the
    // children named last are found too (here after 300 that are gone).
    let dir = fixture_with_children_lists();
    let gone: String = (5000..5300).map(|p| format!("{p} ")).collect();
    write(
        dir.path().join("100/task/100/children"),
        &format!("{gone}101 104 "),
    );
    let followed = ProcTable::at(dir.path()).sample(100).unwrap();
    let walked = ProcTable::at(dir.path()).walk_only().sample(100).unwrap();
    assert_eq!(followed.descendants, 4);
    assert_eq!(followed.children, walked.children);
}

#[test]
fn a_table_does_not_hand_its_proc_directory_to_children() {
    // R5.5: a ProcTable holds `/proc` open between samples, for the life
    // of a supervised run; a command spawned meanwhile (the wrapped command
    // itself, under `stallwarden run`) must not inherit that descriptor.
    let mut table = ProcTable::new();
    table.sample(std::process::id()).unwrap();
    let out = Command::new("ls")
        .args(["-l", "/proc/self/fd"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{listing}");
    assert!(
        !listing.lines().any(|l| l.ends_with("-> /proc")),
        "a child inherited /proc:\n{listing}"
    );
    drop(table);
}

#[test]
fn absurd_counters_saturate_instead_of_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let max = u64::MAX;
    for (pid, ppid) in [(10u32, 1u32), (11, 10), (12, 10)] {
        let line =
            format!("{pid} (x) R {ppid} 0 0 0 -1 0 0 0 0 0 {max} {max} 0 0 20 0 1 0 {max} 0 0\n");
        std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
        std::fs::write(dir.path().join(pid.to_string()).join("stat"), line).unwrap();
    }
    std::fs::write(dir.path().join("stat"), format!("btime {max}\n")).unwrap();
    let mut table = ProcTable::at(dir.path());
    table.sample(10).unwrap();
    let sample = table.sample(10).unwrap();
    assert_eq!(sample.children.len(), 2);
    assert_eq!(sample.cpu_delta_ms, Some(0));
}

#[test]
fn stat_lines_that_do_not_parse_are_errors_naming_the_field() {
    let cases: [(&[u8], StatError); 6] = [
        (b"", StatError::NoCommand),
        (b"104 (trunc", StatError::NoCommand),
        (b"104 ) oops (", StatError::NoCommand),
        (b"x (sh) S 1", StatError::BadPid),
        (
            b"7 (sh) S 1 2 3",
            StatError::Missing {
                name: "utime",
                field: 14,
            },
        ),
        (
            b"7 (sh) SS 1",
            StatError::Invalid {
                name: "state",
                field: 3,
                value: "SS".into(),
            },
        ),
    ];
    for (line, want) in cases {
        assert_eq!(
            ProcStat::parse(line),
            Err(want),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    let garbage = std::fs::read(fixture().join("106/stat")).unwrap();
    let err = ProcStat::parse(&garbage).unwrap_err();
    assert_eq!(
        err.to_string(),
        "stat field 14 (utime) is not valid: `notanumber`"
    );
}

#[test]
fn stat_of_this_very_process_parses() {
    let text = std::fs::read(format!("/proc/{}/stat", std::process::id())).unwrap();
    let stat = ProcStat::parse(&text).unwrap();
    assert_eq!(stat.pid, std::process::id());
    assert_eq!(stat.ppid, std::os::unix::process::parent_id());
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = ProcStat::parse(&bytes);
    }

    #[test]
    fn any_command_name_round_trips(comm in "[ -~]{0,15}", pid in 1u32.., ppid in 0u32.., start in any::<u64>()) {
        let line = format!("{pid} ({comm}) R {ppid} 0 0 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 {start} 0 0\n");
        let stat = ProcStat::parse(line.as_bytes()).unwrap();
        prop_assert_eq!(stat.comm, comm);
        prop_assert_eq!((stat.pid, stat.ppid, stat.utime, stat.stime, stat.starttime), (pid, ppid, 3, 4, start));
    }
}

/// A quick cost check, not a benchmark (those live in the benches): prints
/// the mean time of a full sample of this test process's tree. Run with
/// `cargo test -p stallwarden-sources --test procs --release -- --ignored --nocapture`.
#[test]
#[ignore = "prints timings; not an assertion"]
fn sample_cost_quick_check() {
    let group = Group::spawn("sleep 30 & sleep 30 & wait");
    let mut table = ProcTable::new();
    let _ = table.sample(group.pid());
    let n = 200;
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(table.sample(group.pid()).unwrap());
    }
    let steady = start.elapsed() / n;
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(sample_once(group.pid()).unwrap());
    }
    let full = start.elapsed() / n;
    let procs = std::fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .count();
    eprintln!("{steady:?} per steady sample, {full:?} per full walk, over {procs} processes");
}

// ---- following the kernel's children lists (R9.4) ----

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The fixture tree with the children lists a kernel would give it: 102
/// listed by a second thread of the root, 999 (gone) and 103 (a zombie, no
/// task directory) listed but unreadable, and two hostile loops (the root
/// listing itself, 105 listing its parent).
fn fixture_with_children_lists() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(), dir.path());
    let p = dir.path();
    write(p.join("100/task/100/children"), "101 104 ");
    write(p.join("100/task/777/children"), "102 106 100 ");
    write(p.join("101/task/101/children"), "103 999 ");
    write(p.join("102/task/102/children"), "105 ");
    write(p.join("105/task/105/children"), "102 ");
    write(p.join("200/task/200/children"), "");
    dir
}

#[test]
fn following_children_lists_finds_what_walking_the_table_finds() {
    let dir = fixture_with_children_lists();
    let followed = ProcTable::at(dir.path()).sample(100).unwrap();
    let walked = ProcTable::at(dir.path()).walk_only().sample(100).unwrap();
    assert_eq!(followed.descendants, 4);
    assert_eq!(followed.children, walked.children);
    assert_eq!(
        followed.children.iter().map(|c| c.pid).collect::<Vec<_>>(),
        [102, 105, 101, 103]
    );
}

#[test]
fn following_children_lists_reads_only_the_tree() {
    let dir = fixture_with_children_lists();
    // 300 names 100 as its parent, but no thread of 100 lists it: the
    // kernel's lists are what the sampler follows, so it never reads 300;
    // walking the table finds it by its parent pid.
    write(
        dir.path().join("300/stat"),
        "300 (stray) S 100 300 300 0 -1 4194560 120 0 0 0 1 1 0 0 20 0 1 0 3000 0 0\n",
    );
    let followed = ProcTable::at(dir.path()).sample(100).unwrap();
    let walked = ProcTable::at(dir.path()).walk_only().sample(100).unwrap();
    assert!(followed.children.iter().all(|c| c.pid != 300));
    assert!(walked.children.iter().any(|c| c.pid == 300));
    assert_eq!(walked.descendants, followed.descendants + 1);
}

#[test]
fn a_root_without_children_lists_falls_back_to_the_walk() {
    // The plain fixture has no task directories, as on a kernel built
    // without CONFIG_PROC_CHILDREN: the table is walked, every sample.
    let mut table = ProcTable::at(fixture());
    for _ in 0..3 {
        assert_eq!(table.sample(100).unwrap().descendants, 4);
    }
}

// Children forked by two threads of one process are listed under two
// threads; both ways of sampling see both.
#[test]
fn children_of_every_thread_are_found_both_ways() {
    let from_main = Command::new("sleep").arg("30").spawn().expect("sleep");
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (pid_tx, pid_rx) = std::sync::mpsc::channel();
    let helper = std::thread::spawn(move || {
        let child = Command::new("sleep").arg("31").spawn().expect("sleep");
        pid_tx.send(child.id()).unwrap();
        // Stay alive so the child stays listed under this thread.
        let _ = rx.recv();
        child
    });
    let from_thread = pid_rx.recv().unwrap();
    let me = std::process::id();
    let wanted = [from_main.id(), from_thread];
    let has_both = |c: &[ChildInfo]| wanted.iter().all(|p| c.iter().any(|c| c.pid == *p));
    let followed = sample_until(&mut ProcTable::new(), me, "both sleeps", has_both);
    let walked = sample_until(
        &mut ProcTable::new().walk_only(),
        me,
        "both sleeps",
        has_both,
    );
    for pid in wanted {
        let f = followed.iter().find(|c| c.pid == pid).unwrap();
        let w = walked.iter().find(|c| c.pid == pid).unwrap();
        assert_eq!(
            (f.name.as_str(), f.started_unix_ms),
            (w.name.as_str(), w.started_unix_ms)
        );
    }
    tx.send(()).unwrap();
    let thread_child = helper.join().unwrap();
    for mut child in [from_main, thread_child] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

// R5.5, R2.6: a sample in which the tree used no CPU records no `cpu`
// signal, one in which it used a tick does (kills `> with >=` in
// `Sampling::run`, which took a zero delta for progress).
#[test]
fn a_tree_that_used_no_cpu_since_the_last_sample_records_no_cpu_signal() {
    let (dir, edit) = fixture_copy();
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("idle", Profile::default()).unwrap();
    let sampler = ProcessSampler::with_table(
        ProcTable::at(dir.path()),
        100,
        Duration::from_secs(60),
        Some(task.recorder()),
    )
    .unwrap();
    assert!(sampler.sample_now().is_some());
    assert!(task.last_signal(SignalKind::Cpu).is_none(), "nothing ran");
    edit(101, " 40 25 ", " 41 25 ");
    sampler.sample_now();
    assert!(
        task.last_signal(SignalKind::Cpu).is_some(),
        "grep ran a tick"
    );
}

// R5.5: dropping the sampler stops its thread and waits for it, so no
// sample is still reading `/proc` once drop returns (kills the sampler's
// `Drop` made a no-op and its `!=` made `==`, which left the thread to run
// on, detached). The thread's next sample is held inside the read of the
// root's `stat`, here a FIFO, until the test writes the line.
#[test]
fn dropping_the_sampler_waits_for_the_sample_under_way() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (dir, _) = fixture_copy();
    let sampler =
        ProcessSampler::with_table(ProcTable::at(dir.path()), 100, Duration::from_secs(1), None)
            .unwrap();
    let stat = dir.path().join("100/stat");
    let line = std::fs::read_to_string(&stat).unwrap();
    std::fs::remove_file(&stat).unwrap();
    nix::unistd::mkfifo(&stat, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A FIFO opens for writing without blocking only once a reader has it
    // open: then the thread is inside its sample.
    let start = Instant::now();
    let mut writer = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&stat)
        {
            Ok(w) => break w,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("opening the FIFO: {e}"),
        }
        assert!(start.elapsed() < WAIT, "the thread never took a sample");
        std::thread::sleep(Duration::from_millis(5));
    };
    let (done, dropped) = std::sync::mpsc::channel();
    let dropper = std::thread::spawn(move || {
        drop(sampler);
        done.send(()).unwrap();
    });
    assert!(
        dropped.recv_timeout(Duration::from_millis(300)).is_err(),
        "drop returned while the thread was inside a sample"
    );
    // The rest of the sample (and any later one) reads a plain file again.
    std::fs::remove_file(&stat).unwrap();
    std::fs::write(&stat, &line).unwrap();
    writer.write_all(line.as_bytes()).unwrap();
    drop(writer);
    dropped
        .recv_timeout(WAIT)
        .expect("drop returns once the sample is done");
    dropper.join().unwrap();
}

/// Refuses this thread (and threads it starts) `pidfd_getfd` and netlink
/// sockets, as a kernel without them would; `false` where seccomp is not
/// to be had.
fn refuse_socket_reads_on_this_thread() -> bool {
    const fn stmt(code: u32, k: u32) -> libc::sock_filter {
        libc::sock_filter {
            code: code as u16,
            jt: 0,
            jf: 0,
            k,
        }
    }
    const fn jeq(k: u32, jf: u8) -> libc::sock_filter {
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf,
            k,
        }
    }
    // seccomp_data: the call number at 0, the first argument's low word
    // at 16 (little-endian) or 20.
    let arg0 = if cfg!(target_endian = "little") {
        16
    } else {
        20
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let filter = [
        stmt(load, 0),
        jeq(libc::SYS_pidfd_getfd as u32, 1),
        stmt(libc::BPF_RET, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        jeq(libc::SYS_socket as u32, 3),
        stmt(load, arg0),
        jeq(libc::AF_NETLINK as u32, 1),
        stmt(
            libc::BPF_RET,
            libc::SECCOMP_RET_ERRNO | libc::EAFNOSUPPORT as u32,
        ),
        stmt(libc::BPF_RET, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with a filter program that outlives the call; both
    // settings apply to this thread only (no TSYNC).
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            ) == 0
    }
}

// R5.5, R5.11: a sampler whose task is renewed by `net` and that cannot
// read the tree's TCP sockets (no descriptor copies, no sock_diag) warns
// once, at the first failure, not at every later one (kills the deleted `!`
// of `Sampling::net`'s warned flag). The refusal is a seccomp filter on
// one thread, which takes every sample (the periodic one never comes).
#[test]
fn a_sampler_that_cannot_read_the_sockets_warns_once() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let _client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
    let _conn = server.accept().unwrap();
    let captured = Captured::default();
    let text = std::thread::scope(|s| {
        s.spawn(|| {
            if !refuse_socket_reads_on_this_thread() {
                return None;
            }
            let subscriber = captured.warnings();
            tracing::subscriber::with_default(subscriber, || {
                let guard = Guard::builder().clock(ManualClock::new()).build();
                let net = KindSet::DEFAULT_RENEWING.with(SignalKind::Net);
                let task = guard
                    .start("download", Profile::default().renewed_by(net))
                    .unwrap();
                let sampler = ProcessSampler::spawn(
                    std::process::id(),
                    Duration::from_secs(60),
                    Some(task.recorder()),
                )
                .unwrap();
                assert!(sampler.sample_now().is_some());
                assert!(sampler.sample_now().is_some());
            });
            Some(String::from_utf8(captured.0.lock().unwrap().clone()).unwrap())
        })
        .join()
        .unwrap()
    });
    let Some(text) = text else {
        eprintln!("skipped: no seccomp filter could be installed");
        return;
    };
    assert_eq!(
        text.matches("cannot read the TCP sockets").count(),
        1,
        "{text}"
    );
}
