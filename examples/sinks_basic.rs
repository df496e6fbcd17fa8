//! Wires the stallwarden sinks to one guard on the real clock and runs two
//! simulated tasks that go silent: one stops when its cancellation token
//! fires, the other ignores it until the kill. Prints what each sink saw.
//!
//! Run with `cargo run --example sinks_basic`; it takes about a second.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stallwarden_sinks::callback::CallbackSink;
use stallwarden_sinks::channel::ChannelSink;
use stallwarden_sinks::jsonl::JsonLinesSink;
use stallwarden_sinks::metrics::MetricsSink;
use stallwarden_sinks::token::CancelTokenSink;
use stallwarden_sinks::trace::TracingSink;
use tokio::sync::Notify;
use tracing::field::{Field, Visit};
use watchdog_core::{ActionKind, Guard, Outcome, Profile};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The tracing sink logs through whatever subscriber is installed; this
    // example installs a tiny one that prints (a real runner would use
    // tracing-subscriber's fmt layer).
    tracing::subscriber::set_global_default(PrintSubscriber::default())?;

    let t0 = Instant::now();
    let channel = ChannelSink::new();
    let tokens = CancelTokenSink::new();
    let events_path =
        std::env::temp_dir().join(format!("stallwarden-sinks-{}.jsonl", std::process::id()));
    let killed = Arc::new(Notify::new());
    let on_kill = Arc::clone(&killed);

    let guard = Guard::builder()
        .sink(TracingSink::new())
        .sink(channel.clone())
        .sink(tokens.clone())
        .sink(JsonLinesSink::create(&events_path)?)
        // No metrics recorder is installed here, so its series go nowhere;
        // install e.g. metrics-exporter-prometheus to scrape them.
        .sink(MetricsSink::new())
        .sink(CallbackSink::new(|_| {}).on_action(move |a| {
            let what = match &a.kind {
                ActionKind::Cancel { reason } => format!("cancel ({reason})"),
                ActionKind::Kill => "kill".to_owned(),
                _ => "other".to_owned(),
            };
            println!("[callback] {} action for {}", what, a.name);
            if matches!(a.kind, ActionKind::Kill) {
                on_kill.notify_one();
            }
        }))
        .build();

    // The channel: a subscriber printing every event as it arrives.
    let mut all = channel.subscribe();
    let printer = tokio::spawn(async move {
        let mut finished = 0;
        while let Some(e) = all.recv().await {
            println!(
                "[channel] {:>5} ms  {:<12} {}",
                e.elapsed.as_millis(),
                e.name,
                e.kind.type_name()
            );
            if e.kind.type_name() == "finished" {
                finished += 1;
                if finished == 2 {
                    break;
                }
            }
        }
    });

    let profile = Profile::default()
        .idle(Duration::from_millis(300))
        .grace_period(Duration::from_millis(250))
        .heartbeat_interval(None);

    // A cooperative task: a few outputs, then silence; stops on its token.
    let cooperative = guard.start("cooperative", profile.clone())?;
    let token = tokens.token_for("cooperative");
    let coop = tokio::spawn(async move {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cooperative.output(64, 1);
        }
        tokio::select! {
            () = token.cancelled() => {
                println!("[token] cooperative: token cancelled at {} ms, stopping", t0.elapsed().as_millis());
                cooperative.finish(Outcome::Cancelled, None, None)
            }
            () = tokio::time::sleep(Duration::from_secs(10)) => cooperative.finish(Outcome::Completed, None, None),
        }
    });

    // A stubborn task: silent from the start, ignores its token, ends only
    // when the kill comes (as a process would on SIGKILL).
    let stubborn = guard.start("stubborn", profile)?;
    let stubborn_token = tokens.token_for("stubborn");
    let stub = tokio::spawn(async move {
        killed.notified().await;
        println!(
            "[token] stubborn: token cancelled = {}, killed at {} ms",
            stubborn_token.is_cancelled(),
            t0.elapsed().as_millis()
        );
        stubborn.finish(Outcome::Cancelled, None, Some(9))
    });

    let bound = Duration::from_secs(10);
    tokio::time::timeout(bound, coop).await???;
    tokio::time::timeout(bound, stub).await???;
    tokio::time::timeout(bound, printer).await??;

    // The JSON-lines sink is isolated: flush before reading its file.
    guard.flush(Duration::from_secs(5));
    println!("[jsonl] {}:", events_path.display());
    for line in std::fs::read_to_string(&events_path)?.lines() {
        println!("  {line}");
    }
    std::fs::remove_file(&events_path)?;
    println!(
        "done in {} ms; live tokens left: {}",
        t0.elapsed().as_millis(),
        tokens.live_tokens()
    );
    Ok(())
}

/// A minimal subscriber that prints each event's level, message and fields.
#[derive(Default)]
struct PrintSubscriber {
    next_span: AtomicU64,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            self.0.push_str(&format!(" {}={value}", field.name()));
        }
    }
}

impl tracing::Subscriber for PrintSubscriber {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == stallwarden_sinks::trace::TARGET && *m.level() <= tracing::Level::INFO
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        println!("[tracing {}] {}", event.metadata().level(), fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
