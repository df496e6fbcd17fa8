//! Every sink of this crate names itself, for the errors and logs that cite
//! it: a failing sink is reported under its own name (R8.7, R6.4). No guard
//! runs and no time passes: each sink is built and asked its name. (The
//! monitor sink's name is checked in `monitor_poller.rs`, the ACP sink's in
//! `acp.rs`.)

use stallwarden_sinks::callback::CallbackSink;
use stallwarden_sinks::channel::ChannelSink;
use stallwarden_sinks::jsonl::JsonLinesSink;
use stallwarden_sinks::metrics::MetricsSink;
use stallwarden_sinks::process::ProcessSink;
use stallwarden_sinks::token::CancelTokenSink;
use stallwarden_sinks::trace::TracingSink;
use watchdog_core::Sink;

// R8.7/R6.4: a failing sink is reported by its name, so each sink names
// itself (kills the `name -> ""` / `"xyzzy"` mutants of the callback,
// metrics and tracing sinks).
#[test]
fn sinks_report_failures_under_their_own_names() {
    assert_eq!(CallbackSink::new(|_| {}).name(), "callback");
    assert_eq!(CallbackSink::new(|_| {}).named("ui").name(), "ui");
    assert_eq!(MetricsSink::new().name(), "metrics");
    assert_eq!(TracingSink::new().name(), "tracing");
    // The token sink's own name, not a made-up one (a mutant once returned
    // "xyzzy" and no other test saw it).
    assert_eq!(CancelTokenSink::new().name(), "cancel-token");
}

// R8.7: every sink names itself, for the errors and logs that cite it.
#[test]
fn the_channel_and_json_lines_sinks_name_themselves() {
    assert_eq!(ChannelSink::new().name(), "channel");
    assert_eq!(JsonLinesSink::new(Vec::new()).name(), "jsonl");
}

// R8.7/R6.4: the process sink reports its failures under its own name
// (kills `<impl Sink for ProcessSink>::name -> ""`).
#[test]
fn the_process_sink_names_itself() {
    assert_eq!(ProcessSink::new().name(), "process");
}
