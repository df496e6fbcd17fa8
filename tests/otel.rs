//! R6.8 on the wire: `examples/otel.rs` exports each task as an OTLP span
//! to a real HTTP receiver on loopback, the bodies decoded with the
//! OpenTelemetry protocol crate's own types; and with no collector, or one
//! that never answers, the example still ends, in bounded time, and says
//! the export failed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as Any, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

mod common;

/// How long a real run of the example may take here, loaded or not.
const BOUND: Duration = Duration::from_secs(60);

/// The otel example, built by the cargo running this test.
fn otel_example() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", "otel"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build --example otel");
    assert!(status.success(), "cargo build --example otel failed");
    let deps = std::env::current_exe().expect("test binary path");
    let profile_dir = deps.parent().and_then(Path::parent).expect("target dir");
    profile_dir.join("examples").join("otel")
}

/// Runs the example against `endpoint`; returns how it ended, within
/// [`BOUND`] (it is killed and the test fails past it).
fn run_example(endpoint: &str) -> Output {
    let child = Command::new(otel_example())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TIMEOUT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the otel example");
    common::finish_within(child, BOUND, "the otel example")
}

/// One HTTP/1.1 request read off `reader`: its request line and body;
/// `None` at the end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((line.trim_end().to_owned(), body))
}

/// A loopback OTLP/HTTP receiver: answers every request 200 with an empty
/// protobuf response and sends each `POST /v1/traces` body on.
fn receiver() -> (String, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                while let Some((line, body)) = read_request(&mut reader) {
                    if line.starts_with("POST /v1/traces ") {
                        let _ = tx.send(body);
                    }
                    let _ = writer.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    (endpoint, rx)
}

fn string_attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Any::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}

/// The `event` field (the R8.3 type) of each of `span`'s events, in order.
fn event_types(span: &Span) -> Vec<&str> {
    span.events
        .iter()
        .filter_map(|e| string_attr(&e.attributes, "event"))
        .collect()
}

// R6.8: one `stallwarden.task` span per task, named and profiled, with the
// task's events as span events; the stalled turn's span holds its stall
// and its cancel, the others none.
#[test]
fn each_task_is_exported_as_an_otlp_span_with_its_events() {
    let (endpoint, bodies) = receiver();
    let out = run_example(&endpoint);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("otel: 3 spans exported"), "{stderr}");

    let spans: Vec<Span> = bodies
        .try_iter()
        .map(|body| ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP body"))
        .flat_map(|req| req.resource_spans)
        .flat_map(|rs| rs.scope_spans)
        .flat_map(|ss| ss.spans)
        .collect();
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let task = |name: &str| {
        spans
            .iter()
            .find(|s| string_attr(&s.attributes, "task") == Some(name))
            .unwrap_or_else(|| panic!("no span for {name}: {spans:#?}"))
    };
    for (name, profile) in [
        ("agent/turn-1", "agent"),
        ("agent/turn-2", "agent"),
        ("review/turn-3", "review"),
    ] {
        let span = task(name);
        assert_eq!(span.name, "stallwarden.task");
        assert_eq!(string_attr(&span.attributes, "profile"), Some(profile));
        let types = event_types(span);
        assert_eq!(types.first(), Some(&"started"), "{name}: {types:?}");
        assert_eq!(types.last(), Some(&"finished"), "{name}: {types:?}");
    }
    let stalled = event_types(task("agent/turn-2"));
    assert!(
        stalled.contains(&"stalled") && stalled.contains(&"cancelling"),
        "{stalled:?}"
    );
    for quiet in ["agent/turn-1", "review/turn-3"] {
        assert!(
            !event_types(task(quiet)).contains(&"stalled"),
            "{quiet} never went quiet"
        );
    }
}

// R6.8: no collector listening; the example ends with 0 and says so.
#[test]
fn no_collector_is_said_and_not_fatal() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let out = run_example(&format!("http://127.0.0.1:{port}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("export of 3 spans failed"), "{stderr}");
    assert!(stderr.contains("otel: 0 spans exported"), "{stderr}");
}

// R6.8: a collector that accepts and never answers cannot hang the
// example: the export timeout (2 s) ends it.
#[test]
fn a_collector_that_never_answers_cannot_hang_the_example() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        // Accept, read nothing, answer nothing, until the example is gone.
        let conns: Vec<TcpStream> = listener.incoming().take(1).flatten().collect();
        conns
    });
    let out = run_example(&endpoint);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("export of 3 spans failed"), "{stderr}");
    drop(held);
}
