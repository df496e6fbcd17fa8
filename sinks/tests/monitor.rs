//! The side-agent monitor (R6.6), driven in virtual time (ManualClock +
//! Guard::advance + long-running-after 3 s) with inline delivery so every
//! agent call has happened when `advance`/`poll` returns; plus the worker
//! mode and one real process. Messages (updates folded together, a final's
//! prompt) and the rule monitor are also checked on their own, on hand-built
//! updates with fixed elapsed times and no clock. Redaction itself is in
//! `redact.rs`; the poller's thread in `monitor_poller.rs`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use parking_lot::Mutex;
use stallwarden_sinks::monitor::{
    monitored, MonitorAgent, MonitorBrief, MonitorCall, MonitorError, MonitorFinal,
    MonitorSettings, MonitorSink, MonitorState, MonitorTarget, MonitorUpdate, ObservationKind,
    OutputTail, RuleMonitor,
};
use watchdog_core::{
    Delivery, EventKind, Guard, ManualClock, Outcome, Profile, RecordingSink, TaskHandle, TaskState,
};

mod secrets;

use secrets::SECRETS;

type Calls = Arc<Mutex<Vec<MonitorCall>>>;

/// An agent that records what it is told and says a short line back.
#[derive(Debug)]
struct Probe {
    calls: Calls,
}

impl MonitorAgent for Probe {
    fn open(&mut self, brief: &MonitorBrief) -> Result<Option<String>, MonitorError> {
        self.calls.lock().push(MonitorCall::Open(brief.clone()));
        Ok(Some(format!("opened at {:?}", brief.elapsed)))
    }
    fn update(&mut self, update: &MonitorUpdate) -> Result<Option<String>, MonitorError> {
        self.calls.lock().push(MonitorCall::Update(update.clone()));
        Ok(Some(format!("update at {:?}", update.elapsed)))
    }
    fn finish(&mut self, last: &MonitorFinal) -> Result<Option<String>, MonitorError> {
        self.calls.lock().push(MonitorCall::Final(last.clone()));
        Ok(Some(format!("final {:?}", last.exit_code)))
    }
}

/// A virtual-time world: guard, inline monitor with a probe agent, the
/// task's output buffer.
struct World {
    guard: Guard,
    events: RecordingSink,
    monitor: MonitorSink,
    calls: Calls,
    output: Arc<Mutex<Vec<u8>>>,
}

impl World {
    fn new() -> Self {
        Self::with(|clock| {
            let calls: Calls = Arc::default();
            let c = Arc::clone(&calls);
            let sink = MonitorSink::builder(move |_| {
                Box::new(Probe {
                    calls: Arc::clone(&c),
                })
            })
            .with_delivery(Delivery::Inline)
            .clock(clock)
            .build()
            .unwrap();
            (sink, calls)
        })
    }

    fn with(make: impl FnOnce(ManualClock) -> (MonitorSink, Calls)) -> Self {
        let clock = ManualClock::new();
        let (monitor, calls) = make(clock.clone());
        let events = RecordingSink::new();
        let guard = Guard::builder()
            .clock(clock)
            .sink(events.clone())
            .sink(monitor.clone())
            .build();
        World {
            guard,
            events,
            monitor,
            calls,
            output: Arc::default(),
        }
    }

    fn start(&self, name: &str, profile: Profile) -> TaskHandle {
        let task = self.guard.start(name, monitored(profile)).unwrap();
        let out = Arc::clone(&self.output);
        self.monitor.watch(
            task.id(),
            MonitorTarget::new(format!("run {name}"), move || out.lock().clone()).cwd("/work"),
        );
        task
    }

    fn write(&self, task: &TaskHandle, text: &str) {
        self.output.lock().extend_from_slice(text.as_bytes());
        task.output(text.len() as u64, text.matches('\n').count() as u64);
    }

    /// Advances in `step`s for `total`, polling the monitor after each.
    fn run_for(&self, total: Duration, step: Duration, mut each: impl FnMut()) {
        let mut t = Duration::ZERO;
        while t < total {
            self.guard.advance(step);
            each();
            self.monitor.poll();
            t += step;
        }
    }

    fn calls(&self) -> Vec<MonitorCall> {
        self.calls.lock().clone()
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.calls()
            .iter()
            .map(|c| match c {
                MonitorCall::Open(_) => "open",
                MonitorCall::Update(_) => "update",
                MonitorCall::Final(_) => "final",
            })
            .collect()
    }

    /// Every text an agent was shown, prompts included.
    fn shown(&self) -> String {
        self.calls()
            .iter()
            .map(|c| match c {
                MonitorCall::Open(b) => b.to_prompt(),
                MonitorCall::Update(u) => u.to_prompt(),
                MonitorCall::Final(f) => f.to_prompt(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

const MS: fn(u64) -> Duration = Duration::from_millis;
const SECS: fn(u64) -> Duration = Duration::from_secs;

// R6.6 / R3.6: a task done before long-running-after opens no monitor.
#[test]
fn task_finishing_at_2_9s_opens_no_monitor() {
    let w = World::new();
    let task = w.start("quick", Profile::default());
    w.run_for(MS(2900), MS(100), || {});
    task.finish(Outcome::Completed, Some(0), None).unwrap();
    w.guard.advance(SECS(5));
    w.monitor.poll();
    assert!(w.calls().is_empty(), "{:?}", w.kinds());
    assert!(w.monitor.observations(task.id()).is_empty());
    assert!(!w.events.types_for("quick").contains(&"long_running"));
}

// R6.6: a task running 5 s opens exactly one monitor, at 3 s, and gets a final.
#[test]
fn task_running_5s_opens_exactly_one_monitor_at_3s() {
    let w = World::new();
    let task = w.start("slow", Profile::default());
    w.run_for(SECS(5), MS(250), || {});
    task.finish(Outcome::Completed, Some(0), None).unwrap();
    assert_eq!(w.kinds(), ["open", "final"]);
    let MonitorCall::Open(brief) = &w.calls()[0] else {
        unreachable!()
    };
    assert_eq!(brief.elapsed, SECS(3), "opened at {:?}", w.guard.now());
    assert_eq!(brief.command, "run slow");
    assert_eq!(brief.cwd.as_deref(), Some(std::path::Path::new("/work")));
    let prompt = brief.to_prompt();
    assert!(prompt.contains("Exit status: unavailable"), "{prompt}");
    assert!(
        prompt.contains("Do not assume the command succeeded because output stopped"),
        "{prompt}"
    );
}

// R6.6: never two monitors for one task, even if long_running were seen twice
// or the runner registers the task again after it opened.
#[test]
fn never_opens_two_monitors_for_one_task() {
    let w = World::new();
    let task = w.start("once", Profile::default());
    w.guard.advance(SECS(3));
    w.monitor
        .watch(task.id(), MonitorTarget::new("again", Vec::new));
    assert!(w.monitor.is_open(task.id()));
    w.guard.advance(SECS(3));
    task.finish_completed();
    assert_eq!(w.kinds(), ["open", "final"]);

    let long_running = w
        .events
        .events_of(task.id())
        .into_iter()
        .find(|e| e.kind == EventKind::LongRunning)
        .unwrap();
    let mut state = MonitorState::new("x", None, MonitorSettings::default());
    let tail = Vec::new;
    assert_eq!(state.on_event(&long_running, &tail).len(), 1);
    assert!(state.on_event(&long_running, &tail).is_empty());
}

// R6.6: output every 500 ms for 10 s gives updates at least 2 s apart, each
// with its elapsed time and only the output that is new.
#[test]
fn steady_output_yields_updates_at_least_2s_apart() {
    let w = World::new();
    let task = w.start("steady", Profile::default());
    let mut n = 0;
    w.run_for(SECS(10), MS(500), || {
        n += 1;
        w.write(&task, &format!("line {n}\n"));
    });
    task.finish(Outcome::Completed, Some(0), None).unwrap();

    let calls = w.calls();
    let sent: Vec<Duration> = calls
        .iter()
        .filter(|c| !matches!(c, MonitorCall::Final(_)))
        .map(MonitorCall::elapsed)
        .collect();
    assert_eq!(sent[0], SECS(3));
    assert!(sent.len() >= 4, "updates at {sent:?}");
    for pair in sent.windows(2) {
        assert!(pair[1] - pair[0] >= SECS(2), "updates too close: {sent:?}");
    }
    // Every line after the brief reached the monitor exactly once.
    let mut seen = String::new();
    for c in &calls {
        if let MonitorCall::Update(u) = c {
            assert!(u.output_changed);
            assert_eq!(u.output_quiet_for, Duration::ZERO);
            seen.push_str(&u.new_output);
        }
    }
    let last_update = *sent.last().unwrap();
    // Line 6 is written at 3 s, just after the brief took its snapshot.
    let expected: String = (6..=last_update.as_millis() as u64 / 500)
        .map(|i| format!("line {i}\n"))
        .collect();
    assert_eq!(seen, expected, "updates at {sent:?}");
}

// R6.6: no output and no state change after the brief: no update at all,
// heartbeats notwithstanding; the final still comes.
#[test]
fn unchanged_task_yields_no_updates() {
    let w = World::new();
    let task = w.start("quiet", Profile::default());
    w.write(&task, "connecting to db\n");
    w.run_for(SECS(30), MS(500), || {});
    assert!(w.events.types_for("quiet").contains(&"heartbeat"));
    task.finish(Outcome::Completed, Some(0), None).unwrap();
    assert_eq!(w.kinds(), ["open", "final"]);
}

// R6.6: a state change (a stall, R3.1) is worth an update even with no new
// output, but still no sooner than 2 s after the brief.
#[test]
fn stall_is_reported_in_the_next_update() {
    let w = World::new();
    let task = w.start("stuck", Profile::default().idle(SECS(4)).terminate_after(0));
    w.run_for(SECS(6), MS(500), || {});
    let updates: Vec<MonitorUpdate> = w
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            MonitorCall::Update(u) => Some(u),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 1, "{:?}", w.kinds());
    let u = &updates[0];
    assert_eq!(u.elapsed, SECS(5));
    assert_eq!(u.state, TaskState::Stalled);
    assert!(!u.output_changed);
    assert!(
        u.note.as_deref().unwrap().contains("budget ran out"),
        "{:?}",
        u.note
    );
    task.finish_completed();
}

// R6.6: the final update carries the exit code, completion time and the
// cancelled flag; the rule monitor reports the code and nothing more hopeful.
#[test]
fn final_update_carries_exit_code() {
    let w = World::new();
    let task = w.start("fails", Profile::default());
    w.write(&task, "running migrations\n");
    w.run_for(SECS(4), MS(500), || {});
    w.write(&task, "ERROR: relation \"users\" does not exist\n");
    task.finish(Outcome::Failed, Some(3), None).unwrap();
    let Some(MonitorCall::Final(f)) = w.calls().pop() else {
        panic!("{:?}", w.kinds())
    };
    assert_eq!(f.exit_code, Some(3));
    assert_eq!(f.outcome, Outcome::Failed);
    assert_eq!(f.elapsed, SECS(4));
    assert!(!f.cancelled);
    assert!(
        f.output_tail.ends_with("does not exist\n"),
        "{:?}",
        f.output_tail
    );

    let mut rules = RuleMonitor::new();
    let said = rules.finish(&f).unwrap().unwrap();
    assert!(said.contains("exited with code 3"), "{said}");
    assert!(said.contains("appears to have failed"), "{said}");
}

// R6.6 / R3.5: a cancelled task's final says so.
#[test]
fn cancelled_task_final_is_marked_cancelled() {
    let w = World::new();
    let task = w.start("cancel", Profile::default());
    w.guard.advance(SECS(4));
    w.guard.cancel("cancel", "user asked").unwrap();
    task.finish(Outcome::Cancelled, None, Some(15)).unwrap();
    let Some(MonitorCall::Final(f)) = w.calls().pop() else {
        panic!("{:?}", w.kinds())
    };
    assert!(f.cancelled);
    assert_eq!(f.signal, Some(15));
}

// R6.6: no secret reaches a monitor — not in the brief, not in an update (even
// one split across two updates), not in the final, not in an observation.
#[test]
fn no_secret_reaches_the_monitor() {
    let w = World::new();
    let task = w.start("secrets", Profile::default());
    // Registering again before the monitor opens replaces the target; the
    // command line itself carries a credential.
    let out = Arc::clone(&w.output);
    w.monitor.watch(
        task.id(),
        MonitorTarget::new(
            "mysql -u root --password Pa55w0rdFlag -e 'select 1'",
            move || out.lock().clone(),
        ),
    );
    for (line, _) in &SECRETS[..8] {
        w.write(&task, &format!("{line}\n"));
    }
    w.run_for(SECS(4), MS(500), || {});
    for (line, _) in &SECRETS[8..] {
        w.write(&task, &format!("{line}\n"));
    }
    w.write(&task, "login password=");
    w.run_for(SECS(2), MS(500), || {});
    w.write(&task, "SplitSecret99 accepted\n");
    w.run_for(SECS(2), MS(500), || {});
    task.finish(Outcome::Completed, Some(0), None).unwrap();

    assert_eq!(w.kinds(), ["open", "update", "update", "final"]);
    let shown = w.shown();
    for (_, secret) in SECRETS.iter().chain([&("", "SplitSecret99")]) {
        assert!(
            !shown.contains(secret),
            "{secret:?} reached the monitor:\n{shown}"
        );
    }
    assert!(shown.contains("[REDACTED]"));
    assert!(
        shown.contains("Command: mysql -u root --password [REDACTED] -e"),
        "{shown}"
    );
    assert!(
        shown.contains("accepted"),
        "the rest of the line still shows:\n{shown}"
    );
}

/// An agent that fails on a chosen call.
#[derive(Debug)]
struct Faulty {
    panic_on_update: bool,
}

impl MonitorAgent for Faulty {
    fn open(&mut self, _: &MonitorBrief) -> Result<Option<String>, MonitorError> {
        if self.panic_on_update {
            Ok(Some("watching".into()))
        } else {
            Err(MonitorError::new("rate limited (429)"))
        }
    }
    fn update(&mut self, _: &MonitorUpdate) -> Result<Option<String>, MonitorError> {
        panic!("model client crashed");
    }
    fn finish(&mut self, _: &MonitorFinal) -> Result<Option<String>, MonitorError> {
        Ok(Some("should not be called after a failure".into()))
    }
}

fn faulty_world(panic_on_update: bool) -> World {
    World::with(|clock| {
        let sink = MonitorSink::builder(move |_| Box::new(Faulty { panic_on_update }))
            .with_delivery(Delivery::Inline)
            .clock(clock)
            .build()
            .unwrap();
        (sink, Calls::default())
    })
}

// R6.6 / R6.2: a monitor that panics is reported to the main agent, stops,
// and the task carries on and finishes normally.
#[test]
fn panicking_agent_is_reported_and_task_finishes_normally() {
    let w = faulty_world(true);
    let task = w.start("build", Profile::default());
    w.run_for(SECS(8), MS(500), || w.write(&task, "compiling\n"));
    task.finish(Outcome::Completed, Some(0), None).unwrap();

    w.events.assert_settled("build");
    let finished = w.events.events_of(task.id()).pop().unwrap();
    assert_eq!(
        finished.kind,
        EventKind::Finished {
            outcome: Outcome::Completed,
            exit_code: Some(0),
            signal: None
        }
    );
    assert!(!w.events.types_for("build").contains(&"cancelling"));
    let obs = w.monitor.observations(task.id());
    assert_eq!(obs.len(), 2, "{obs:#?}");
    assert_eq!(obs[1].kind, ObservationKind::MonitorFailed);
    assert_eq!(obs[1].at_elapsed, SECS(5));
    assert_eq!(
        obs[1].to_string(),
        "monitor for task build failed at 00:05: the monitor agent panicked: model client crashed. \
         Monitoring stopped; the task itself is unaffected."
    );
}

// R6.6: an agent error (a rate limit) is reported the same way.
#[test]
fn erroring_agent_is_reported() {
    let w = faulty_world(false);
    let task = w.start("probe", Profile::default());
    w.run_for(SECS(6), MS(500), || w.write(&task, "row\n"));
    task.finish_completed();
    let obs = w.monitor.drain_observations();
    assert_eq!(obs.len(), 1, "{obs:#?}");
    assert_eq!(obs[0].kind, ObservationKind::MonitorFailed);
    assert!(obs[0].text.contains("rate limited (429)"));
    w.events.assert_settled("probe");
}

// R6.6: observations carry provenance, are compact, and are kept after the
// task ends; draining hands each over once.
#[test]
fn observations_are_kept_after_the_task_ends() {
    let w = World::with(|clock| {
        let sink = MonitorSink::rule_based()
            .with_delivery(Delivery::Inline)
            .clock(clock)
            .max_observation_chars(200)
            .build()
            .unwrap();
        (sink, Calls::default())
    });
    let task = w.start(
        "migrate",
        Profile::default().idle(SECS(5)).terminate_after(0),
    );
    w.write(&task, "Waiting for table metadata lock\n");
    w.run_for(SECS(12), MS(500), || {});
    task.finish(Outcome::Completed, Some(0), None).unwrap();

    let drained = w.monitor.drain_observations();
    assert!(w.monitor.drain_observations().is_empty());
    let kept = w.monitor.observations(task.id());
    assert_eq!(drained, kept);
    let lines: Vec<String> = kept.iter().map(ToString::to_string).collect();
    assert!(
        lines[0].starts_with(
            "monitor update for task migrate at 00:03: `run migrate` has run for 00:03"
        ),
        "{lines:#?}"
    );
    assert!(lines[0].contains("may be waiting on a lock"), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("no new output for")
            && l.ends_with("This is an observation, not a confirmed failure.")),
        "{lines:#?}"
    );
    assert!(
        lines.last().unwrap().starts_with(
            "monitor summary for task migrate at 00:12: the command exited with code 0"
        ),
        "{lines:#?}"
    );
    for o in &kept {
        assert!(
            o.text.chars().count() <= 201 && !o.text.contains('\n'),
            "{o:?}"
        );
    }
}

// R6.6: the rule monitor never claims success from silence: without an exit
// code it says it does not know.
#[test]
fn rule_monitor_never_claims_success_without_exit_code() {
    let w = World::with(|clock| {
        let sink = MonitorSink::rule_based()
            .with_delivery(Delivery::Inline)
            .clock(clock)
            .build()
            .unwrap();
        (sink, Calls::default())
    });
    let quiet = w.start("quiet", Profile::default());
    w.run_for(SECS(20), MS(500), || {});
    quiet.finish(Outcome::Completed, None, None).unwrap();
    let killed = w.start("killed", Profile::default());
    w.run_for(SECS(4), MS(500), || {});
    killed.finish(Outcome::Failed, None, Some(9)).unwrap();

    let all = w.monitor.drain_observations();
    assert!(!all.is_empty());
    for o in &all {
        let text = o.text.to_lowercase();
        assert!(
            !text.contains("succe") && !text.contains("exited with code 0"),
            "{o}"
        );
    }
    assert!(all
        .iter()
        .any(|o| o.text.contains("how it ended is not confirmed")));
}

// R6.6: repeated retries and non-zero exits are flagged with uncertainty.
#[test]
fn rule_monitor_flags_retries_and_errors() {
    let w = World::with(|clock| {
        let sink = MonitorSink::rule_based()
            .with_delivery(Delivery::Inline)
            .clock(clock)
            .build()
            .unwrap();
        (sink, Calls::default())
    });
    let task = w.start("fetch", Profile::default());
    w.run_for(SECS(8), MS(500), || {
        w.write(&task, "connection refused; retrying in 1s\n")
    });
    task.finish(Outcome::Failed, Some(7), None).unwrap();
    let text: Vec<String> = w
        .monitor
        .observations(task.id())
        .iter()
        .map(|o| o.text.clone())
        .collect();
    assert!(
        text.iter()
            .any(|t| t.contains("retries so far; the command may be failing repeatedly")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("repeated") && t.contains("may be looping")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("\"connection refused\"; this may indicate a failure")),
        "{text:#?}"
    );
    assert!(
        text.last().unwrap().contains("exited with code 7"),
        "{text:#?}"
    );
}

/// An agent whose `open` blocks until the test lets it go.
#[derive(Debug)]
struct Slow {
    gate: Arc<Mutex<Option<mpsc::Receiver<()>>>>,
}

impl MonitorAgent for Slow {
    fn open(&mut self, _: &MonitorBrief) -> Result<Option<String>, MonitorError> {
        if let Some(rx) = self.gate.lock().take() {
            let _ = rx.recv_timeout(SECS(30));
        }
        Ok(Some("opened".into()))
    }
    fn update(&mut self, u: &MonitorUpdate) -> Result<Option<String>, MonitorError> {
        Ok(Some(format!("update at {:?}", u.elapsed)))
    }
    fn finish(&mut self, f: &MonitorFinal) -> Result<Option<String>, MonitorError> {
        Ok(Some(format!("final, exit {:?}", f.exit_code)))
    }
}

/// A monitor update of `state` with `output` (changed when non-empty).
fn rule_update(state: TaskState, output: &str, note: Option<&str>) -> MonitorUpdate {
    MonitorUpdate {
        task: watchdog_core::TaskId::from_raw(1),
        name: Arc::from("job"),
        elapsed: Duration::from_secs(10),
        new_output: output.into(),
        output_changed: !output.is_empty(),
        output_quiet_for: Duration::ZERO,
        state,
        note: note.map(String::from),
    }
}

fn rule_final(exit_code: i32, tail: &str) -> MonitorFinal {
    MonitorFinal {
        task: watchdog_core::TaskId::from_raw(1),
        name: Arc::from("job"),
        elapsed: Duration::from_secs(20),
        completed_at: UNIX_EPOCH,
        outcome: if exit_code == 0 {
            Outcome::Completed
        } else {
            Outcome::Failed
        },
        exit_code: Some(exit_code),
        signal: None,
        cancelled: false,
        output_tail: tail.into(),
    }
}

// R6.6: the rule monitor counts retries across updates, says a stall and a
// stop in their own words, and ends with the retries seen, if any.
#[test]
fn the_rule_monitor_counts_retries_and_names_stalls_and_stops() {
    let mut rules = RuleMonitor::new();
    let said = rules
        .update(&rule_update(
            TaskState::Working,
            "connect failed, retrying in 5s\nconnect failed, retrying in 10s\n",
            None,
        ))
        .unwrap()
        .unwrap();
    assert!(said.contains("output shows 2 retries so far"), "{said}");
    let said = rules
        .update(&rule_update(
            TaskState::Stalled,
            "",
            Some("idle budget ran out"),
        ))
        .unwrap()
        .unwrap();
    assert!(
        said.contains("the guard reports a stall (idle budget ran out)"),
        "{said}"
    );
    let said = rules
        .update(&rule_update(
            TaskState::Cancelling,
            "",
            Some("cancel requested"),
        ))
        .unwrap()
        .unwrap();
    assert!(
        said.contains("the guard is stopping the command (cancel requested)"),
        "{said}"
    );
    let said = rules.finish(&rule_final(0, "done\n")).unwrap().unwrap();
    assert!(said.ends_with("; 2 retries were seen"), "{said}");
    let said = RuleMonitor::new()
        .finish(&rule_final(0, "done\n"))
        .unwrap()
        .unwrap();
    assert!(!said.contains("retries"), "{said}");
}

// R6.6: an error seen earlier is recalled at the end of a failed command
// only; a success does not dig up an error it recovered from.
#[test]
fn an_earlier_error_is_recalled_only_when_the_command_failed() {
    let seen = || {
        let mut rules = RuleMonitor::new();
        rules
            .update(&rule_update(
                TaskState::Working,
                "ERROR: disk quota exceeded\n",
                None,
            ))
            .unwrap();
        rules
    };
    let failed = seen()
        .finish(&rule_final(1, "cleaning up\n"))
        .unwrap()
        .unwrap();
    assert!(
        failed.contains("last error-like line: \"ERROR: disk quota exceeded\""),
        "{failed}"
    );
    let ok = seen()
        .finish(&rule_final(0, "cleaning up\n"))
        .unwrap()
        .unwrap();
    assert!(!ok.contains("error-like"), "{ok}");
}

// R6.6: zero counts in test summaries are not failures, wherever the zero
// or `no` stands; a real count is.
#[test]
fn zero_counts_are_not_errors() {
    for line in [
        "0 errors",
        "no errors",
        "build finished with 0 errors",
        "found no errors",
        "test result: ok. 12 passed; 0 failed",
    ] {
        let said = RuleMonitor::new()
            .update(&rule_update(TaskState::Working, &format!("{line}\n"), None))
            .unwrap();
        assert!(
            !said
                .as_deref()
                .unwrap_or("")
                .contains("may indicate a failure"),
            "{line}: {said:?}"
        );
    }
    let said = RuleMonitor::new()
        .update(&rule_update(TaskState::Working, "2 errors\n", None))
        .unwrap()
        .unwrap();
    assert!(said.contains("output mentions \"error\""), "{said}");
}

// R6.6: the rule monitor counts the output lines it has read, across
// updates, and says so when it notes plain progress.
#[test]
fn the_rule_monitor_counts_output_lines() {
    let mut rules = RuleMonitor::new();
    let said = rules
        .update(&rule_update(
            TaskState::Working,
            "compiling a\ncompiling b\n\ncompiling c\n",
            None,
        ))
        .unwrap()
        .unwrap();
    assert_eq!(
        said,
        "output is progressing (3 lines so far); no completion signal observed yet"
    );
}

// R6.6 / R6.2: in the default worker mode a hung agent blocks neither the
// guard nor the task; its queued updates are folded and its final arrives
// once it catches up.
#[test]
fn slow_agent_in_worker_mode_blocks_nothing() {
    let (release, gate) = mpsc::channel();
    let gate = Arc::new(Mutex::new(Some(gate)));
    let w = World::with(|clock| {
        let sink = MonitorSink::builder(move |_| {
            Box::new(Slow {
                gate: Arc::clone(&gate),
            })
        })
        .clock(clock)
        .build()
        .unwrap();
        (sink, Calls::default())
    });
    let task = w.start("hung", Profile::default());
    w.run_for(SECS(10), MS(500), || {
        assert!(
            w.guard.flush(SECS(10)),
            "the monitor sink fell behind the guard"
        );
        w.write(&task, "step\n");
    });
    task.finish(Outcome::Completed, Some(0), None).unwrap();
    assert!(w.guard.flush(SECS(10)));
    w.events.assert_settled("hung");
    assert!(!w.monitor.flush(MS(1)), "the agent is still stuck in open");

    release.send(()).unwrap();
    assert!(w.monitor.flush(SECS(10)), "the agent never caught up");
    let obs = w.monitor.observations(task.id());
    assert_eq!(obs.first().unwrap().text, "opened");
    assert_eq!(obs.last().unwrap().text, "final, exit Some(0)");
    assert!(obs.len() <= 4, "queued updates should be folded: {obs:#?}");
}

/// Runs `sh -c script` as task `name`, watched by `monitor` as `command`
/// with the lines it prints as the output tail, until it exits; the task
/// is left for the caller to finish.
fn run_watched(
    guard: &Guard,
    monitor: &MonitorSink,
    (name, command): (&str, &str),
    profile: Profile,
    script: &str,
) -> (TaskHandle, std::process::ExitStatus) {
    let mut child = Command::new("sh")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let task = guard.start_process(name, profile, child.id()).unwrap();
    let output: Arc<Mutex<Vec<u8>>> = Arc::default();
    let tail = Arc::clone(&output);
    monitor.watch(
        task.id(),
        MonitorTarget::new(command, move || tail.lock().clone()),
    );
    let rec = task.recorder();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap() + "\n";
        output.lock().extend_from_slice(line.as_bytes());
        rec.output(line.len() as u64, 1);
    }
    let status = child.wait().unwrap();
    (task, status)
}

// R6.6 on a real clock with a real process: the poller drives updates while
// output flows and the summary names the real exit code. Only generous,
// non-timing assertions.
#[test]
fn real_process_is_monitored_on_a_real_clock() {
    let monitor = MonitorSink::rule_based()
        .poll_interval(Some(MS(100)))
        .build()
        .unwrap();
    let guard = Guard::builder().sink(monitor.clone()).build();
    let (task, status) = run_watched(
        &guard,
        &monitor,
        ("sh-steps", "sh -c 'for i in …'"),
        Profile::default().long_running_after(MS(500)),
        "for i in 1 2 3 4 5 6 7 8; do echo \"step $i token=abc$i\"; sleep 0.25; done; exit 4",
    );
    task.finish(Outcome::Failed, status.code(), None).unwrap();
    assert!(guard.flush(SECS(10)));
    assert!(monitor.flush(SECS(10)));

    let obs = monitor.observations(task.id());
    assert!(obs.len() >= 2, "{obs:#?}");
    assert!(
        obs.last().unwrap().text.contains("exited with code 4"),
        "{obs:#?}"
    );
    assert!(obs.iter().all(|o| !o.text.contains("abc")), "{obs:#?}");
}

// R6.6: only tasks the runner registered get a monitor.
#[test]
fn unregistered_task_gets_no_monitor() {
    let w = World::new();
    let task = w
        .guard
        .start("agent-turn", monitored(Profile::default()))
        .unwrap();
    w.run_for(SECS(8), MS(500), || {});
    task.finish_completed();
    assert!(w.calls().is_empty(), "{:?}", w.kinds());
    assert!(w.events.types_for("agent-turn").contains(&"long_running"));
    // Registered too late: ignored, and nothing lingers.
    w.monitor
        .watch(task.id(), MonitorTarget::new("late", Vec::new));
    assert!(
        format!("{:?}", w.monitor).contains("watched: 0"),
        "{:?}",
        w.monitor
    );
}

// R6.6, R10.6: a task watched by name (the one task reference of every
// sink) is monitored like one watched by id: before it starts, the next task
// of that name; while it runs, the live one. `is_open` and `observations`
// take the name too, and a later task reusing the name is not mixed in.
#[test]
fn a_task_watched_by_name_is_monitored_like_one_watched_by_id() {
    let w = World::new();
    let target = || MonitorTarget::new("run deploy", Vec::new);
    w.monitor.watch("deploy", target()); // before it starts
    let first = w
        .guard
        .start("deploy", monitored(Profile::default()))
        .unwrap();
    w.run_for(SECS(4), MS(500), || {});
    assert!(w.monitor.is_open("deploy"));
    assert!(w.monitor.is_open(first.id()));
    first.finish_completed();
    assert!(!w.monitor.is_open("deploy"));
    assert_eq!(w.kinds(), ["open", "final"]);
    let seen = w.monitor.observations("deploy");
    assert!(!seen.is_empty());
    assert_eq!(seen, w.monitor.observations(first.id()));

    // A live task is found by name; the first run's observations stay its own.
    let second = w
        .guard
        .start("deploy", monitored(Profile::default()))
        .unwrap();
    w.monitor.watch("deploy", target());
    w.run_for(SECS(4), MS(500), || {});
    assert!(w.monitor.is_open(second.id()));
    second.finish_completed();
    assert_eq!(w.kinds(), ["open", "final", "open", "final"]);
    let latest = w.monitor.observations("deploy");
    assert!(latest.iter().all(|o| o.task == second.id()), "{latest:?}");
    assert!(seen.iter().all(|o| o.task == first.id()));
}

// --- Messages built by hand, without a monitor sink ---

// R6.6: the monitor's final message tells the model how the command ended
// and shows its last output (kills `MonitorFinal::to_prompt -> String::new()`).
#[test]
fn the_final_prompt_says_how_the_command_ended() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("build", Profile::default()).unwrap();
    let last = MonitorFinal {
        task: task.id(),
        name: Arc::from("build"),
        elapsed: Duration::from_secs(75),
        completed_at: UNIX_EPOCH,
        outcome: Outcome::Failed,
        exit_code: Some(2),
        signal: None,
        cancelled: false,
        output_tail: "error: linker failed".into(),
    };
    let prompt = last.to_prompt();
    assert!(prompt.contains("01:15"), "{prompt}");
    assert!(prompt.contains("exit code 2"), "{prompt}");
    assert!(prompt.contains("error: linker failed"), "{prompt}");
}

// R6.6: the updates a slow agent fell behind on are folded into one, and
// output from any of them is still shown, whichever came last (kills `|=`
// for `&=` in `MonitorUpdate::absorb`, which then told the agent "No new
// output" and hid the output it folded in).
#[test]
fn a_folded_update_keeps_the_output_of_any_of_its_parts() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("build", Profile::default()).unwrap();
    let update = |secs: u64, output: &str, note: Option<&str>| MonitorUpdate {
        task: task.id(),
        name: Arc::from("build"),
        elapsed: Duration::from_secs(secs),
        new_output: output.into(),
        output_changed: !output.is_empty(),
        output_quiet_for: Duration::from_secs(if output.is_empty() { 2 } else { 0 }),
        state: TaskState::Working,
        note: note.map(String::from),
    };
    // Output first, then a state-only update.
    let mut folded = update(4, "compiling core\n", None);
    folded.absorb(update(6, "", Some("stalled: idle budget ran out")));
    assert!(folded.output_changed);
    let prompt = folded.to_prompt();
    assert!(prompt.contains("compiling core"), "{prompt}");
    assert!(prompt.contains("stalled: idle budget"), "{prompt}");
    // A state-only update, then output.
    let mut folded = update(4, "", Some("recovered"));
    folded.absorb(update(6, "linking\n", None));
    assert!(folded.output_changed);
    assert!(
        folded.to_prompt().contains("linking"),
        "{}",
        folded.to_prompt()
    );
}

// R6.6: folding updates joins their output with one line break between
// parts: added after a part that lacks one, never doubled, never leading.
#[test]
fn folded_output_is_joined_with_exactly_one_line_break() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("fold", Profile::default()).unwrap();
    let update = |output: &str, changed: bool| MonitorUpdate {
        task: task.id(),
        name: Arc::from("fold"),
        elapsed: Duration::from_secs(1),
        new_output: output.into(),
        output_changed: changed,
        output_quiet_for: Duration::ZERO,
        state: TaskState::Working,
        note: None,
    };
    for (first, changed, then, want) in [
        ("compiling", true, "linking\n", "compiling\nlinking\n"),
        ("compiling\n", true, "linking\n", "compiling\nlinking\n"),
        ("", false, "linking\n", "linking\n"),
        ("", true, "linking\n", "linking\n"),
    ] {
        let mut folded = update(first, changed);
        folded.absorb(update(then, true));
        assert_eq!(folded.new_output, want, "{first:?} then {then:?}");
    }
}

// R6.6: a monitor target says the command it describes.
#[test]
fn a_monitor_target_says_its_command() {
    let target = MonitorTarget::new("cargo build --release", Vec::new).cwd("/work");
    assert_eq!(target.command(), "cargo build --release");
}

// --- Finals, closed states and the output cap (R6.6) ---

// R6.6 / R3.5: a final is marked cancelled when the guard cancelled the
// task, whatever outcome the runner then reports, and when the runner
// reports a cancel of its own (kills `||` for `&&` in `MonitorState::finish`).
#[test]
fn a_final_is_cancelled_by_the_guard_or_by_the_outcome() {
    let w = World::new();
    let by_guard = w.start("by-guard", Profile::default());
    let by_runner = w.start("by-runner", Profile::default());
    w.run_for(SECS(4), MS(500), || {});
    w.guard.cancel("by-guard", "user asked").unwrap();
    by_guard.finish(Outcome::Failed, None, Some(15)).unwrap();
    by_runner.finish(Outcome::Cancelled, Some(1), None).unwrap();
    let finals: Vec<(String, bool)> = w
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            MonitorCall::Final(f) => Some((f.name.to_string(), f.cancelled)),
            _ => None,
        })
        .collect();
    assert_eq!(
        finals,
        [
            ("by-guard".to_owned(), true),
            ("by-runner".to_owned(), true)
        ]
    );
}

// R6.6: a state is closed only once its task finished (kills
// `MonitorState::is_closed -> true`).
#[test]
fn a_state_closes_when_its_task_finishes() {
    let w = World::new();
    let task = w.start("closes", Profile::default());
    w.guard.advance(SECS(1));
    task.finish_completed();
    let finished = w
        .events
        .events_of(task.id())
        .into_iter()
        .find(|e| matches!(e.kind, EventKind::Finished { .. }))
        .unwrap();
    let mut state = MonitorState::new("x", None, MonitorSettings::default());
    assert!(!state.is_closed());
    let tail = Vec::new;
    state.on_event(&finished, &tail);
    assert!(state.is_closed());
}

// R6.6: a message carries at most `max_output_bytes` of output, the newest,
// from a line start (kills `>` for `==` in the render bound).
#[test]
fn a_final_carries_at_most_the_newest_max_output_bytes() {
    let w = World::new();
    let task = w.start("long", Profile::default());
    w.run_for(SECS(4), MS(500), || {});
    let lines: String = (0..2000).map(|i| format!("line {i:05}\n")).collect();
    w.write(&task, &lines);
    task.finish_completed();
    let Some(MonitorCall::Final(f)) = w.calls().pop() else {
        panic!("{:?}", w.kinds())
    };
    let max = MonitorSettings::default().max_output_bytes;
    assert!(f.output_tail.len() <= max, "{}", f.output_tail.len());
    assert!(
        f.output_tail.starts_with("line "),
        "{:?}",
        &f.output_tail[..20]
    );
    assert!(f.output_tail.ends_with("line 01999\n"));
}

// R6.6: an update whose new output starts mid-line resends that line from
// its start, so a secret split across two updates is still redacted whole
// (kills the deleted `!` before `cut` in the render's context flag).
#[test]
fn an_update_resends_the_line_its_new_output_starts_in() {
    let w = World::new();
    let task = w.start("ctx", Profile::default());
    w.run_for(SECS(4), MS(500), || {});
    w.write(&task, "connecting with password=");
    w.run_for(SECS(3), MS(500), || {});
    w.write(&task, "hunter2 now\nnext\n");
    w.run_for(SECS(3), MS(500), || {});
    let Some(MonitorCall::Update(u)) = w.calls().pop() else {
        panic!("{:?}", w.kinds())
    };
    assert_eq!(
        u.new_output,
        "connecting with password=[REDACTED] now\nnext\n"
    );
    assert!(!w.shown().contains("hunter2"));
    task.finish_completed();
}

// R6.6: observations are kept for the last 256 tasks, the oldest task's
// dropped first, however many observations each has (kills the deleted `!`
// in `Core::record`, which never queued a new task for eviction).
#[test]
fn observations_are_kept_for_the_last_256_tasks() {
    let w = World::new();
    let first = w.start("first", Profile::default());
    w.guard.advance(SECS(4));
    assert!(!w.monitor.observations(first.id()).is_empty());
    let later: Vec<TaskHandle> = (0..256)
        .map(|i| w.start(&format!("t{i}"), Profile::default()))
        .collect();
    w.guard.advance(SECS(4));
    assert!(w.monitor.observations(first.id()).is_empty());
    for t in &later {
        assert!(!w.monitor.observations(t.id()).is_empty());
    }
    first.finish_completed();
    for t in later {
        t.finish_completed();
    }
}

// --- Shard 3/10 survivors (issue 26, R10.4) ---

/// A bounded output window that also counts every byte ever written, as the
/// output reader of `stallwarden-sources` does.
#[derive(Default)]
struct CountedTail {
    inner: Mutex<(Vec<u8>, u64)>,
}

impl CountedTail {
    fn set(&self, window: &str, total: u64) {
        *self.inner.lock() = (window.as_bytes().to_vec(), total);
    }
}

impl OutputTail for CountedTail {
    fn snapshot(&self) -> Vec<u8> {
        self.inner.lock().0.clone()
    }
    fn total_bytes(&self) -> Option<u64> {
        Some(self.inner.lock().1)
    }
}

// R6.6: with a byte count from the tail, a brief whose window still holds
// the first byte ever written shows the output from that byte (its first
// line whole), and a brief whose window slid starts at the next whole line
// (kills `<=` for `>` in `Cursor::advance`'s stream start, and
// `<impl OutputTail for Arc<T>>::total_bytes -> Some(1)`: a runner shares
// its tail as an `Arc`, and the count must pass through it).
#[test]
fn a_counted_tail_shows_its_first_line_only_while_the_window_holds_it() {
    let w = World::new();
    let whole = Arc::new(CountedTail::default());
    let slid = Arc::new(CountedTail::default());
    let a = w
        .guard
        .start("whole", monitored(Profile::default()))
        .unwrap();
    let b = w
        .guard
        .start("slid", monitored(Profile::default()))
        .unwrap();
    w.monitor
        .watch(a.id(), MonitorTarget::new("run whole", Arc::clone(&whole)));
    w.monitor
        .watch(b.id(), MonitorTarget::new("run slid", Arc::clone(&slid)));
    whole.set("first line\nsecond line\n", 23);
    slid.set("ne 1\nline 2\n", 100);
    w.run_for(SECS(4), MS(500), || {});
    let mut briefs: Vec<(String, String)> = w
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            MonitorCall::Open(b) => Some((b.name.to_string(), b.output_tail)),
            _ => None,
        })
        .collect();
    briefs.sort();
    assert_eq!(
        briefs,
        [
            ("slid".to_owned(), "line 2\n".to_owned()),
            ("whole".to_owned(), "first line\nsecond line\n".to_owned()),
        ]
    );
    a.finish_completed();
    b.finish_completed();
}

// R6.6: an update whose new output fits the message bound carries just that
// output, however much was shown before (kills `-` for `+` in
// `MonitorState::render`'s bound, which counted the old output too).
#[test]
fn an_update_within_the_output_bound_carries_only_the_new_lines() {
    let w = bounded_world(256);
    let task = w.start("small", Profile::default());
    let first: String = (1..=25).map(|i| format!("line {i:02}\n")).collect();
    w.write(&task, &first);
    w.run_for(SECS(4), MS(500), || {});
    // 16 new bytes, 216 in all: under the 256-byte bound.
    w.write(&task, "line 26\nline 27\n");
    w.run_for(SECS(3), MS(500), || {});
    assert_eq!(w.kinds(), ["open", "update"]);
    let Some(MonitorCall::Update(u)) = w.calls().pop() else {
        panic!("{:?}", w.kinds())
    };
    assert_eq!(u.new_output, "line 26\nline 27\n");
    task.finish_completed();
}

// R6.6: on plain progressing output the rule monitor says "progressing" at
// most every 30 s, not at every update (compact observations, no running
// commentary; kills the deleted `!` before `due` in `RuleMonitor::update`,
// which spoke at every update but the due ones).
#[test]
fn rule_monitor_notes_plain_progress_at_most_every_30_s() {
    let w = World::with(|clock| {
        let sink = MonitorSink::rule_based()
            .with_delivery(Delivery::Inline)
            .clock(clock)
            .build()
            .unwrap();
        (sink, Calls::default())
    });
    let task = w.start("build", Profile::default());
    let mut n = 0;
    w.run_for(SECS(70), MS(500), || {
        n += 1;
        w.write(&task, &format!("compiling unit {n}\n"));
    });
    let progress = w
        .monitor
        .observations(task.id())
        .iter()
        .filter(|o| o.text.contains("output is progressing"))
        .count();
    // Opened at 3 s; due again at 33 s and 63 s.
    assert_eq!(progress, 2);
    task.finish_completed();
}

// R6.6 on a real clock with a real process: between guard events (none
// here: heartbeats off) the background poller keeps the agent updated
// while output flows, after the first look too (the update interval is
// 2 s at least; output flows for 4.4 s). Generous counts.
#[test]
fn the_poller_keeps_updating_between_guard_events() {
    let calls: Calls = Arc::default();
    let c = Arc::clone(&calls);
    let monitor = MonitorSink::builder(move |_| {
        Box::new(Probe {
            calls: Arc::clone(&c),
        })
    })
    .update_interval(SECS(2))
    .poll_interval(Some(MS(50)))
    .build()
    .unwrap();
    let guard = Guard::builder().sink(monitor.clone()).build();
    let (task, status) = run_watched(
        &guard,
        &monitor,
        ("polled", "steps"),
        Profile::default()
            .long_running_after(MS(100))
            .heartbeat_interval(None),
        "for i in $(seq 1 22); do echo step $i; sleep 0.2; done",
    );
    let updates = calls
        .lock()
        .iter()
        .filter(|c| matches!(c, MonitorCall::Update(u) if u.output_changed))
        .count();
    task.finish(Outcome::Completed, status.code(), None)
        .unwrap();
    assert!(monitor.flush(SECS(10)));
    assert!(
        updates >= 1,
        "{updates} updates in 4.4 s of output: {:#?}",
        calls.lock()
    );
}

// R6.6: what agents said is kept within bounds: the last 64 observations
// of a task, and the last 1024 not yet drained across tasks, exactly.
#[test]
fn observations_are_kept_to_exactly_their_bounds() {
    let w = World::new();
    let task = w.start("chatty", Profile::default().heartbeat_interval(None));
    w.guard.advance(SECS(3)); // long-running: the monitor opens (1 observation)
    for i in 0..1100 {
        w.write(&task, &format!("step {i}\n"));
        w.guard.advance(SECS(30));
        w.monitor.poll();
    }
    let calls = w.calls().len();
    assert!(calls > 1030, "{calls} agent calls");
    let obs = w.monitor.observations(task.id());
    assert_eq!(obs.len(), 64);
    assert_eq!(
        obs.last().unwrap().text,
        format!("update at {:?}", SECS(3 + 30 * 1100))
    );
    let unread = w.monitor.drain_observations();
    assert_eq!(unread.len(), 1024);
    assert_eq!(unread.last(), obs.last());
    task.finish_completed();
}

// R6.6: flush returns as soon as the agents are done: the last call's end
// wakes it, so a long timeout is a bound, not a wait. A hundred runs, so
// that flush is surely waiting while a worker still works in some of them:
// under a lost wake-up this test would sit out its hour.
#[test]
fn flush_returns_when_the_agents_are_done_not_at_its_timeout() {
    let calls: Calls = Arc::default();
    let w = World::with(|clock| {
        let c = Arc::clone(&calls);
        let sink = MonitorSink::builder(move |_| {
            Box::new(Probe {
                calls: Arc::clone(&c),
            })
        })
        .clock(clock)
        .build()
        .unwrap();
        (sink, Arc::clone(&calls))
    });
    for i in 0..100 {
        let task = w.start(
            &format!("isolated-{i}"),
            Profile::default().heartbeat_interval(None),
        );
        w.guard.advance(SECS(3));
        task.finish_completed();
        assert!(w.guard.flush(Duration::from_secs(3600)), "events delivered");
        assert!(w.monitor.flush(Duration::from_secs(3600)), "agents done");
    }
    assert_eq!(w.kinds().len(), 200, "an open and a final each");
}

// R6.6: the sink remembers the last 1024 finished tasks, so a watch that
// comes after any of them finished leaves nothing registered.
#[test]
fn a_late_watch_of_any_of_the_last_1024_finished_tasks_is_ignored() {
    let w = World::new();
    let first = w.guard.start("t-0", Profile::default()).unwrap();
    let oldest = first.id();
    first.finish_completed();
    for i in 1..1024 {
        w.guard
            .start(format!("t-{i}"), Profile::default())
            .unwrap()
            .finish_completed();
    }
    w.monitor
        .watch(oldest, MonitorTarget::new("late", Vec::new));
    let shown = format!("{:?}", w.monitor);
    assert!(shown.contains("watched: 0"), "{shown}");
}

// R6.6: every guard verdict reaches the monitor as a note in the guard's
// words, with the state it leaves: the stall, recovered, a trigger's
// reason (the state holds until the cancel), the cancel with its signal,
// the kill after the grace period.
#[test]
fn each_guard_verdict_is_a_note_in_the_next_update() {
    let w = World::new();
    let task = w.start(
        "noted",
        Profile::default()
            .idle(SECS(4))
            .terminate_after(0)
            .grace_period(SECS(3))
            .heartbeat_interval(None),
    );
    let notes = || -> Vec<(TaskState, String)> {
        w.calls()
            .into_iter()
            .filter_map(|c| match c {
                MonitorCall::Update(u) => Some((u.state, u.note.unwrap_or_default())),
                _ => None,
            })
            .collect()
    };
    w.run_for(SECS(6), MS(500), || {}); // open at 3 s, stalled at 4 s
    w.write(&task, "resumed\n"); // recovered after 6 s of silence
    w.run_for(SECS(3), MS(500), || {});
    task.trigger("tool reported a loop").unwrap(); // cancelling (SIGTERM)
    w.run_for(SECS(4), MS(500), || {}); // killed 3 s later
    task.finish(Outcome::Cancelled, None, Some(9)).unwrap();
    let all = notes();
    let note = |state, text: &str| (state, text.to_owned());
    assert_eq!(
        all,
        [
            note(
                TaskState::Stalled,
                "stalled: startup budget ran out after 4s of silence (strike 1)"
            ),
            note(
                TaskState::Working,
                "recovered: progress after 6s of silence"
            ),
            note(TaskState::Working, "tool reported a loop"),
            note(
                TaskState::Cancelling,
                "cancelling (SIGTERM): triggered: tool reported a loop"
            ),
            note(
                TaskState::Cancelling,
                "killed with SIGKILL after the grace period"
            ),
        ]
    );
}

// R6.6: output of exactly the bound is shown whole, from its first line;
// only output beyond the bound is cut (at a line start).
#[test]
fn output_of_exactly_the_bound_is_shown_whole() {
    let w = bounded_world(256);
    let task = w.start("exact", Profile::default());
    let all: String = (1..=32).map(|i| format!("line {i:02}\n")).collect();
    assert_eq!(all.len(), 256);
    w.write(&task, &all);
    w.run_for(SECS(4), MS(500), || {});
    let Some(MonitorCall::Open(brief)) = w.calls().first().cloned() else {
        panic!("{:?}", w.kinds())
    };
    assert_eq!(brief.output_tail, all);
    task.finish_completed();
}

/// A world whose inline probe monitor shows at most `max` bytes of output.
fn bounded_world(max: usize) -> World {
    World::with(|clock| {
        let calls: Calls = Arc::default();
        let c = Arc::clone(&calls);
        let sink = MonitorSink::builder(move |_| {
            Box::new(Probe {
                calls: Arc::clone(&c),
            })
        })
        .with_delivery(Delivery::Inline)
        .clock(clock)
        .max_output_bytes(max)
        .build()
        .unwrap();
        (sink, calls)
    })
}

fn last_update(w: &World) -> MonitorUpdate {
    match w.calls().pop() {
        Some(MonitorCall::Update(u)) => u,
        _ => panic!("{:?}", w.kinds()),
    }
}

// R6.6: output cut to the bound keeps the line that starts exactly at the
// cut: 33 lines of 8 bytes under a 256-byte bound show lines 02 to 33.
#[test]
fn a_cut_at_a_line_start_keeps_that_line() {
    let w = bounded_world(256);
    let task = w.start("cut", Profile::default());
    let all: String = (1..=33).map(|i| format!("line {i:02}\n")).collect();
    w.write(&task, &all);
    w.run_for(SECS(4), MS(500), || {});
    let Some(MonitorCall::Open(brief)) = w.calls().first().cloned() else {
        panic!("{:?}", w.kinds())
    };
    assert_eq!(brief.output_tail, all["line 01\n".len()..]);
    task.finish_completed();
}

// R6.6: new output that starts inside a line longer than the 4 KiB look
// back is shown from the next whole line: never from the stream's start.
#[test]
fn new_output_inside_a_very_long_line_starts_at_the_next_line() {
    let w = bounded_world(1 << 16);
    let task = w.start("long-line", Profile::default());
    w.write(&task, &"x".repeat(5000));
    w.run_for(SECS(4), MS(500), || {}); // the brief
    w.write(&task, &format!("{}\nnext\n", "y".repeat(100)));
    w.run_for(SECS(3), MS(500), || {});
    assert_eq!(last_update(&w).new_output, "next\n");
    task.finish_completed();
}

// R6.6: with a byte count from the tail, an unchanged count is no new
// output: the update says how long the output has been quiet.
#[test]
fn a_counted_tail_that_did_not_grow_is_no_new_output() {
    let w = World::new();
    let tail = Arc::new(CountedTail::default());
    let task = w
        .guard
        .start(
            "counted",
            monitored(Profile::default().idle(SECS(5)).terminate_after(0)),
        )
        .unwrap();
    w.monitor.watch(
        task.id(),
        MonitorTarget::new("run counted", Arc::clone(&tail)),
    );
    tail.set("first line\n", 11);
    task.output(11, 1);
    w.run_for(SECS(7), MS(500), || {}); // brief at 3 s, stall at 5 s
    let u = last_update(&w);
    assert_eq!(u.state, TaskState::Stalled);
    assert!(!u.output_changed, "{u:?}");
    assert!(
        u.to_prompt().contains("No new output for"),
        "{}",
        u.to_prompt()
    );
    task.finish_completed();
}
