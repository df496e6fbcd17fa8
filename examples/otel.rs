//! A runner that exports its tasks to OpenTelemetry (R6.8): each task is a
//! trace span, `stallwarden.task`, with its events (started, stalled,
//! cancelling, finished, ...) as span events, through `tracing-opentelemetry`
//! and the OTLP exporter, with no code of ours beyond the subscriber set-up.
//!
//! Three simulated agent turns run one after another on the real clock, in
//! about a second: `agent/turn-1` speaks steadily and completes,
//! `agent/turn-2` goes quiet past its idle budget and is struck out and
//! cancelled, `review/turn-3` completes. The span's `profile` field is the
//! part of the task's name before the `/`.
//!
//! The exporter speaks OTLP over HTTP with protobuf bodies to
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces`; the SDK's default is
//! `http://localhost:4318`), with the SDK's other `OTEL_*` variables. No
//! collector is needed: every export is bounded by a timeout
//! (`OTEL_EXPORTER_OTLP_TIMEOUT` in milliseconds, 2 s here by default), and
//! a failed export is said on stderr, not fatal. The exit status is 0 either
//! way.
//!
//! ```text
//! cargo run --example otel
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 cargo run --example otel
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use stallwarden_sinks::trace::TracingSink;
use tracing_subscriber::layer::SubscriberExt;
use watchdog_core::{Guard, Outcome, Profile};

/// How long one export may take unless `OTEL_EXPORTER_OTLP_TIMEOUT` says.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the final flush may take in all.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The OTLP exporter, saying each failed export on stderr and counting the
/// spans that went out: the SDK itself reports export errors only through
/// its internal logs, which a host may not have.
#[derive(Debug)]
struct Said<E> {
    inner: E,
    exported: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for Said<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                self.exported.fetch_add(spans, Ordering::Relaxed);
            }
            Err(e) => eprintln!("otel: export of {spans} spans failed: {e}"),
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if std::env::var_os("OTEL_EXPORTER_OTLP_TIMEOUT").is_none() {
        exporter = exporter.with_timeout(EXPORT_TIMEOUT);
    }
    let exported = Arc::new(AtomicUsize::new(0));
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Said {
            inner: exporter.build()?,
            exported: Arc::clone(&exported),
        })
        .with_resource(
            Resource::builder()
                .with_service_name("stallwarden-otel-example")
                .build(),
        )
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("stallwarden")));
    tracing::subscriber::set_global_default(subscriber)?;

    run_turns()?;

    // Bounded: a missing collector costs at most the timeouts, never a hang.
    if let Err(e) = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
        eprintln!("otel: shutdown: {e}");
    }
    eprintln!("otel: {} spans exported", exported.load(Ordering::Relaxed));
    Ok(())
}

/// Runs the three turns under a guard whose tracing sink opens one span
/// per task.
fn run_turns() -> Result<(), Box<dyn std::error::Error>> {
    let sink = TracingSink::new().profile_of(|name| name.split('/').next().unwrap_or("").into());
    let guard = Guard::builder().sink(sink).build();
    let profile = Profile::default()
        .idle(Duration::from_millis(200))
        .terminate_after(1)
        .grace_period(Duration::from_millis(100))
        .heartbeat_interval(None);

    for name in ["agent/turn-1", "agent/turn-2", "review/turn-3"] {
        let turn = guard.start(name, profile.clone())?;
        let quiet = name == "agent/turn-2";
        for _ in 0..5 {
            turn.output(64, 1);
            std::thread::sleep(Duration::from_millis(40));
        }
        if quiet {
            // Silent past the idle budget: stalled, struck out, cancelling.
            std::thread::sleep(Duration::from_millis(450));
            turn.finish(Outcome::Cancelled, None, Some(15))?;
        } else {
            turn.finish_completed();
        }
    }
    Ok(())
}
