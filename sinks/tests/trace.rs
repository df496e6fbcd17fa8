//! The tracing sink against a guard on virtual time, captured by a real
//! (minimal) `tracing::Subscriber`: structured fields and levels per event
//! (R6.4), and unknown values left out rather than zero (R4.1).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stallwarden_sinks::trace::{TracingSink, TARGET};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use watchdog_core::{Delivery, Guard, ManualClock, Outcome, Profile, Sink};

const SECOND: Duration = Duration::from_secs(1);

/// One captured record: level, target and every field as text.
#[derive(Clone, Debug)]
struct Captured {
    level: Level,
    target: String,
    fields: BTreeMap<String, String>,
    /// The span the record was emitted in, if any.
    span: Option<u64>,
}

/// One captured span: its name and fields, and whether it was closed.
#[derive(Clone, Debug)]
struct CapturedSpan {
    name: String,
    fields: BTreeMap<String, String>,
    closed: bool,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// The smallest real subscriber: keeps every event and span, and which
/// span each event was emitted in (the test is single-threaded, so one
/// stack of entered spans is enough).
#[derive(Clone, Default)]
struct Capture {
    records: Arc<Mutex<Vec<Captured>>>,
    next_span: Arc<AtomicU64>,
    spans: Arc<Mutex<BTreeMap<u64, CapturedSpan>>>,
    entered: Arc<Mutex<Vec<u64>>>,
}

struct FieldText<'a>(&'a mut BTreeMap<String, String>);

impl Visit for FieldText<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next_span.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut FieldText(&mut fields));
        self.spans.lock().insert(
            id,
            CapturedSpan {
                name: attrs.metadata().name().into(),
                fields,
                closed: false,
            },
        );
        Id::from_u64(id)
    }
    fn try_close(&self, id: Id) -> bool {
        if let Some(span) = self.spans.lock().get_mut(&id.into_u64()) {
            span.closed = true;
        }
        true
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut FieldText(&mut fields));
        self.records.lock().push(Captured {
            level: *event.metadata().level(),
            target: event.metadata().target().into(),
            fields,
            span: self.entered.lock().last().copied(),
        });
    }
    fn enter(&self, id: &Id) {
        self.entered.lock().push(id.into_u64());
    }
    fn exit(&self, id: &Id) {
        let mut entered = self.entered.lock();
        if entered.last() == Some(&id.into_u64()) {
            entered.pop();
        }
    }
}

impl Capture {
    /// The sink's records (the guard's own diagnostics filtered out).
    fn records(&self) -> Vec<Captured> {
        self.records
            .lock()
            .iter()
            .filter(|r| r.target == TARGET)
            .cloned()
            .collect()
    }

    fn of(&self, event: &str) -> Vec<Captured> {
        self.records()
            .into_iter()
            .filter(|r| r.field("event") == Some(event))
            .collect()
    }
}

/// Runs `scenario` with a capturing subscriber as this thread's default;
/// the sink is inline, so every record is emitted on this thread.
fn capture(sink: TracingSink, scenario: impl FnOnce(&Guard)) -> Capture {
    let cap = Capture::default();
    tracing::subscriber::with_default(cap.clone(), || {
        let guard = Guard::builder()
            .clock(ManualClock::new())
            .sink(sink)
            .build();
        scenario(&guard);
    });
    cap
}

// R6.4 / R3.1 / R3.5: started → stalled → cancelling → killed → finished,
// each a record with structured fields at a level that fits.
#[test]
fn escalation_is_logged_with_fields_and_levels() {
    let cap = capture(TracingSink::new(), |g| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .grace_period(2 * SECOND)
            .heartbeat_interval(None);
        let t = g.start_process("build", profile, 4242).unwrap();
        t.tool_started("call-1", "bash").unwrap();
        g.advance(5 * SECOND);
        g.advance(2 * SECOND);
        t.finish(Outcome::Cancelled, None, Some(9)).unwrap();
    });
    let events: Vec<_> = cap
        .records()
        .iter()
        .filter_map(|r| r.field("event").map(str::to_owned))
        .collect();
    assert_eq!(
        events,
        ["started", "stalled", "cancelling", "killed", "finished"]
    );

    let started = &cap.of("started")[0];
    assert_eq!(started.level, Level::INFO);
    assert_eq!(started.field("task"), Some("build"));
    assert_eq!(started.field("pid"), Some("4242"));
    assert_eq!(started.field("elapsed_ms"), Some("0"));
    assert!(started.field("task_id").is_some());

    let stalled = &cap.of("stalled")[0];
    assert_eq!(stalled.level, Level::WARN);
    assert_eq!(stalled.field("budget"), Some("execution"));
    assert_eq!(stalled.field("strike"), Some("1"));
    assert_eq!(stalled.field("terminate_after"), Some("1"));
    assert_eq!(stalled.field("silent_ms"), Some("5000"));
    assert_eq!(
        stalled.field("last_step"),
        Some("tool \"bash\" still running")
    );
    assert_eq!(
        stalled.field("children"),
        None,
        "unknown children are absent"
    );

    let cancelling = &cap.of("cancelling")[0];
    assert_eq!(cancelling.level, Level::ERROR);
    assert_eq!(cancelling.field("signal"), Some("SIGTERM"));
    assert!(cancelling
        .field("reason")
        .unwrap()
        .contains("execution budget"));

    let killed = &cap.of("killed")[0];
    assert_eq!(killed.level, Level::ERROR);
    assert_eq!(killed.field("signal"), Some("SIGKILL"));
    assert_eq!(killed.field("elapsed_ms"), Some("7000"));

    let finished = &cap.of("finished")[0];
    assert_eq!(finished.level, Level::INFO);
    assert_eq!(finished.field("outcome"), Some("cancelled"));
    assert_eq!(finished.field("exit_signal"), Some("9"));
    assert_eq!(finished.field("exit_code"), None);

    // The actions are logged at DEBUG with the pid they name.
    let actions: Vec<_> = cap
        .records()
        .into_iter()
        .filter(|r| r.field("event").is_none())
        .collect();
    assert_eq!(actions.len(), 2);
    assert!(actions.iter().all(|a| a.level == Level::DEBUG));
    assert!(actions.iter().all(|a| a.field("pid") == Some("4242")));
}

// R3.7 heartbeats at DEBUG by default (or as configured) with their
// fields; `last_output_age_ms` absent before any output (R4.1).
#[test]
fn heartbeats_are_logged_at_the_configured_level() {
    let scenario = |g: &Guard| {
        let profile = Profile::default()
            .idle(60 * SECOND)
            .heartbeat_interval(Some(10 * SECOND));
        let t = g.start("sql", profile).unwrap();
        g.advance(10 * SECOND);
        t.output(100, 2);
        g.advance(20 * SECOND);
        t.finish_completed();
    };
    let cap = capture(TracingSink::new(), scenario);
    let beats = cap.of("heartbeat");
    assert!(beats.len() >= 2);
    assert!(beats.iter().all(|b| b.level == Level::DEBUG));
    assert_eq!(beats[0].field("last_output_age_ms"), None);
    assert_eq!(beats[0].field("total_bytes"), Some("0"));
    assert_eq!(beats[0].field("idle_remaining_ms"), Some("50000"));
    assert_eq!(beats[0].field("deadline_ms"), None);
    let last = beats.last().unwrap();
    assert_eq!(last.field("last_output_age_ms"), Some("20000"));
    assert_eq!(last.field("total_lines"), Some("2"));

    let cap = capture(TracingSink::new().heartbeat_level(Level::TRACE), scenario);
    assert!(cap.of("heartbeat").iter().all(|b| b.level == Level::TRACE));
}

// R3.3, R3.4, R2.10: recovered at INFO, deadline / liveness / trigger at
// WARN with their reason.
#[test]
fn verdicts_carry_their_reason() {
    let cap = capture(TracingSink::new(), |g| {
        let quiet = Profile::default().idle(5 * SECOND).heartbeat_interval(None);
        let t = g.start("flaky", quiet.clone().terminate_after(2)).unwrap();
        g.advance(5 * SECOND);
        t.output(1, 0);
        t.finish_completed();

        let t = g
            .start("long", quiet.clone().idle(60 * SECOND).deadline(3 * SECOND))
            .unwrap();
        g.advance(3 * SECOND);
        t.finish_completed();

        let t = g
            .start(
                "worker",
                quiet.clone().idle(60 * SECOND).liveness(2 * SECOND),
            )
            .unwrap();
        t.heartbeat();
        g.advance(2 * SECOND);
        t.finish_completed();

        let t = g.start("self", quiet).unwrap();
        t.trigger("disk full").unwrap();
        t.finish_failed();
    });
    let rec = &cap.of("recovered")[0];
    assert_eq!(rec.level, Level::INFO);
    assert_eq!(rec.field("silent_ms"), Some("5000"));
    for (event, needle) in [
        ("deadline_exceeded", "deadline"),
        ("liveness_lost", "heartbeat"),
        ("triggered", "disk full"),
    ] {
        let r = &cap.of(event)[0];
        assert_eq!(r.level, Level::WARN, "{event}");
        assert!(
            r.field("reason").unwrap().contains(needle),
            "{event}: {r:?}"
        );
    }
}

#[derive(Debug)]
struct WedgedGrep;

impl watchdog_core::ChildProbe for WedgedGrep {
    fn children(&self) -> Option<Vec<watchdog_core::ChildInfo>> {
        Some(vec![watchdog_core::ChildInfo {
            pid: 7,
            name: "grep".into(),
            state: watchdog_core::ProcState::DiskWait,
            wchan: Some("io_schedule".into()),
            blocked_on: None,
            started_unix_ms: None,
            cpu_ms: 3,
            cpu_delta_ms: Some(0),
        }])
    }
}

/// The `stalled` record of a task whose children `probe` reports.
fn stalled_with(probe: Arc<dyn watchdog_core::ChildProbe>) -> Captured {
    let cap = capture(TracingSink::new(), |g| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .terminate_after(0)
            .heartbeat_interval(None);
        let t = g.start_process("harness", profile, 100).unwrap();
        t.set_children_probe(probe);
        g.advance(5 * SECOND);
        t.finish_completed();
    });
    cap.of("stalled").remove(0)
}

// R3.1 / R5.5: a stall names its suspect children by executable name, pid,
// state and wait channel.
#[test]
fn a_stall_names_its_suspect_children() {
    let stalled = &stalled_with(Arc::new(WedgedGrep));
    assert_eq!(stalled.field("children"), Some("1"));
    assert_eq!(
        stalled.field("suspects"),
        Some("grep[7] disk_wait in io_schedule")
    );
}

// R6.8: each task is one span (`task`, `task_id`, `profile`) holding all
// of its events, closed after `finished`; two tasks, two spans.
#[test]
fn each_task_is_a_span_holding_its_events() {
    let sink = TracingSink::new().profile_of(|name| name.split('/').next().unwrap_or("").into());
    let cap = capture(sink, |g| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .terminate_after(0)
            .heartbeat_interval(None);
        let a = g.start("agent/turn-1", profile.clone()).unwrap();
        let b = g.start("review/turn-2", profile).unwrap();
        g.advance(5 * SECOND);
        a.output(1, 1);
        a.finish_completed();
        b.output(1, 1);
        g.advance(SECOND);
        b.finish_completed();
    });
    let spans = cap.spans.lock().clone();
    let tasks: Vec<&CapturedSpan> = spans
        .values()
        .filter(|s| s.name == stallwarden_sinks::trace::SPAN)
        .collect();
    assert_eq!(tasks.len(), 2, "{spans:?}");
    for (id, span) in &spans {
        if span.name != stallwarden_sinks::trace::SPAN {
            continue;
        }
        assert!(span.closed, "span of {:?} still open", span.fields);
        let task = span.fields["task"].clone();
        let profile = task.split('/').next().unwrap();
        assert_eq!(
            span.fields.get("profile").map(String::as_str),
            Some(profile)
        );
        let events: Vec<String> = cap
            .records()
            .into_iter()
            .filter(|r| r.field("task") == Some(&task))
            .inspect(|r| assert_eq!(r.span, Some(*id), "{r:?} outside its span"))
            .filter_map(|r| r.field("event").map(str::to_owned))
            .collect();
        assert_eq!(
            events,
            ["started", "stalled", "recovered", "finished"],
            "{task}"
        );
    }
}

// R6.4: a cancel action is logged as a cancel with the reason the guard
// gave, a kill as a kill (kills the deleted `ActionKind::Cancel` arm of
// `on_action`, which logged a cancel as a bare "action dispatched" without
// its reason; shard 3/10, issue 26).
#[test]
fn actions_are_logged_with_what_they_do_and_why() {
    let cap = capture(TracingSink::new(), |g| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .grace_period(2 * SECOND)
            .heartbeat_interval(None);
        let t = g.start_process("build", profile, 4242).unwrap();
        g.advance(5 * SECOND);
        g.advance(2 * SECOND);
        t.finish(Outcome::Cancelled, None, Some(9)).unwrap();
    });
    let reason = cap.of("cancelling")[0]
        .field("reason")
        .expect("the cancelling event has a reason")
        .to_owned();
    assert!(!reason.is_empty());
    let actions: Vec<(Option<String>, Option<String>)> = cap
        .records()
        .into_iter()
        .filter(|r| r.field("event").is_none())
        .map(|r| {
            (
                r.field("message").map(str::to_owned),
                r.field("reason").map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            (Some("cancel action dispatched".to_owned()), Some(reason)),
            (Some("kill action dispatched".to_owned()), None),
        ]
    );
}

#[derive(Debug)]
struct TwoChildren;

impl watchdog_core::ChildProbe for TwoChildren {
    fn children(&self) -> Option<Vec<watchdog_core::ChildInfo>> {
        let mut grep = WedgedGrep.children().unwrap().remove(0);
        let mut sh = grep.clone();
        sh.pid = 8;
        sh.name = "sh".into();
        sh.state = watchdog_core::ProcState::Sleeping;
        sh.wchan = None;
        grep.cpu_ms = 4;
        Some(vec![grep, sh])
    }
}

// R3.1 / R5.5: several suspects are listed in order, comma-separated.
#[test]
fn a_stall_lists_several_suspects_in_order() {
    let stalled = &stalled_with(Arc::new(TwoChildren));
    assert_eq!(stalled.field("children"), Some("2"));
    assert_eq!(
        stalled.field("suspects"),
        Some("grep[7] disk_wait in io_schedule, sh[8] sleeping")
    );
}

// R3.6: crossing the long-running threshold is an INFO record of its own.
#[test]
fn a_long_running_task_is_logged_once_at_info() {
    let cap = capture(TracingSink::new(), |g| {
        let profile = Profile::default()
            .idle(600 * SECOND)
            .long_running_after(3 * SECOND)
            .heartbeat_interval(None);
        let t = g.start("slow", profile).unwrap();
        g.advance(10 * SECOND);
        t.finish_completed();
    });
    let long = cap.of("long_running");
    assert_eq!(long.len(), 1, "{long:?}");
    assert_eq!(long[0].level, Level::INFO);
    assert_eq!(long[0].field("task"), Some("slow"));
    assert_eq!(long[0].field("elapsed_ms"), Some("3000"));
    assert_eq!(long[0].field("message"), Some("task is long-running"));
}

// R6.4: a sink's delivery mode is the caller's choice (kills
// `TracingSink::with_delivery -> Default::default()`).
#[test]
fn the_tracing_sink_keeps_the_delivery_it_was_given() {
    assert_eq!(
        TracingSink::new()
            .with_delivery(Delivery::Isolated)
            .delivery(),
        Delivery::Isolated
    );
    assert_eq!(
        TracingSink::new()
            .with_delivery(Delivery::Inline)
            .delivery(),
        Delivery::Inline
    );
}
