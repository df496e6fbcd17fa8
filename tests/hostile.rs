//! Hostile input (R10.2, R7.2, R5.4, R6.5): property-based generators for
//! the three places stallwarden reads what someone else wrote — TOML configs,
//! control-socket requests and sd_notify datagrams — each from arbitrary
//! bytes and from near-valid input built out of the real vocabulary. The
//! properties: never a panic; a config is accepted or refused with an error
//! that names its origin (and a key it did not know); a control request
//! always gets one JSON response line and the server keeps serving; a
//! datagram is handled or counted as malformed, and the socket keeps
//! serving.
//!
//! Case counts: pure properties take `PROPTEST_CASES` (default 256);
//! socket-backed ones a quarter of it (default 64). Failing cases are
//! written to `tests/hostile.proptest-regressions`, which is checked in.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, FileFailurePersistence, TestRunner};
use stallwarden::config::{Config, ConfigErrorKind};
use stallwarden::control::ControlServer;
use stallwarden::sources::notify::{
    Malformed, Notification, NotifySocket, MAX_DATAGRAM, MAX_STATUS,
};
use stallwarden::sources::Refusal;
use stallwarden::{Guard, ManualClock, Profile};

const ORIGIN: &str = "hostile.toml";

/// Cases for properties that go through a real socket: a quarter of
/// `PROPTEST_CASES`, 64 by default.
fn socket_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .map_or(64, |n| (n / 4).max(1));
    ProptestConfig {
        cases,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

// ------------------------------------------------------------------ config

/// Table headers, valid and not.
const HEADERS: &[&str] = &[
    "[defaults]",
    "[profile.ci]",
    "[profile.nightly]",
    "[profile.\"with space\"]",
    "[profile]",
    "[defaults.idle]",
    "[[profile.ci]]",
    "[profile.ci.idle]",
    "[unknown]",
    "[profile.]",
    "[",
    "",
];

/// Values of every TOML type and every shape of mistake.
const VALUES: &[&str] = &[
    "\"90s\"",
    "\"1h 30m\"",
    "\"off\"",
    "\"0s\"",
    "\"1ms\"",
    "\"40days\"",
    "\"99999999999999999999999s\"",
    "\"-5s\"",
    "\"soon\"",
    "\"\"",
    "\"OFF\"",
    "0",
    "1",
    "3",
    "-1",
    "4294967296",
    "1.5",
    "nan",
    "inf",
    "true",
    "false",
    "[]",
    "[\"output\", \"heartbeat\"]",
    "[\"cpu\", \"custom\", \"output\"]",
    "[\"nonsense\"]",
    "[1, 2]",
    "[\"output\", \"output\"]",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "'90s'",
    "\"\"\"90s\"\"\"",
    "\"\\u0000\"",
    "\"\u{1F600}\"",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(Config::keys()).prop_map(str::to_owned),
        1 => proptest::sample::select(Config::keys()).prop_map(|k| k.replace('-', "_")),
        1 => proptest::sample::select(Config::keys()).prop_map(|k| k.to_uppercase()),
        1 => "[a-z-]{1,16}",
        1 => Just("\"idle\"".to_owned()),
        1 => Just("idle.x".to_owned()),
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => proptest::sample::select(HEADERS).prop_map(str::to_owned),
        8 => (key(), proptest::sample::select(VALUES)).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => "\\PC{0,40}",
    ]
}

/// A config text built from real table names, key names and values of
/// every type, with duplicates and mistakes.
fn near_valid_config() -> impl Strategy<Value = String> {
    proptest::collection::vec(line(), 0..16).prop_map(|lines| lines.join("\n"))
}

/// The checks every config result must pass, whatever the text.
fn check_config(text: &str) -> Result<(), TestCaseError> {
    match Config::from_str(text, ORIGIN) {
        Ok(config) => {
            // Accepted: every profile it names resolves to a valid one.
            let defaults = config
                .profile(None)
                .map_err(|e| TestCaseError::fail(format!("accepted, but [defaults] fails: {e}")))?;
            prop_assert!(defaults.validate().is_ok());
            for name in config.profile_names() {
                let p = config.profile(Some(name)).map_err(|e| {
                    TestCaseError::fail(format!("accepted, but profile {name} fails: {e}"))
                })?;
                prop_assert!(p.validate().is_ok(), "profile {name}: {p:?}");
            }
        }
        Err(e) => {
            // R7.2: the message names the file, then (when known) where.
            let msg = e.to_string();
            prop_assert!(msg.starts_with(ORIGIN), "{msg}");
            prop_assert_eq!(e.origin(), ORIGIN);
            prop_assert!(!msg.contains('\n') || matches!(e.kind(), ConfigErrorKind::Syntax(_)));
            if let Some(loc) = e.location() {
                let lines = text.split('\n').count();
                prop_assert!(loc.line >= 1 && loc.line <= lines, "{msg}: {lines} lines");
                prop_assert!(loc.column >= 1, "{msg}");
            }
            if let Some(key) = e.key() {
                prop_assert!(!key.is_empty(), "{msg}");
            }
        }
    }
    Ok(())
}

proptest! {
    // R7.2, R10.2: any text at all is a config or an error naming its
    // origin — never a panic.
    #[test]
    fn arbitrary_text_is_a_config_or_an_error_naming_its_origin(text in "\\PC{0,300}") {
        check_config(&text)?;
    }

    // R7.2, R10.2: near-valid configs — real tables and keys, values of
    // every type, duplicate keys and tables — are accepted only when every
    // profile in them is valid, and refused with a located error otherwise.
    #[test]
    fn near_valid_configs_are_valid_or_refused_with_a_located_error(text in near_valid_config()) {
        check_config(&text)?;
    }

    // R7.2: a typo of a real key is never silently accepted (it would
    // disable a safety limit); the error names the typo.
    #[test]
    fn a_mistyped_key_is_refused_by_name(
        key in proptest::sample::select(Config::keys()),
        at in any::<proptest::sample::Index>(),
        ch in "[a-z_-]",
        table in proptest::sample::select(&["[defaults]", "[profile.ci]"][..]),
    ) {
        let mut typo: Vec<char> = key.chars().collect();
        typo.insert(at.index(typo.len() + 1), ch.chars().next().unwrap());
        let typo: String = typo.into_iter().collect();
        prop_assume!(!Config::keys().contains(&typo.as_str()));
        let text = format!("{table}\nidle = \"90s\"\n{typo} = \"5s\"\n");
        let err = Config::from_str(&text, ORIGIN)
            .err()
            .ok_or_else(|| TestCaseError::fail(format!("{typo} was accepted")))?;
        let msg = err.to_string();
        prop_assert!(msg.starts_with(ORIGIN), "{msg}");
        prop_assert!(msg.contains(&typo), "{msg}");
        prop_assert_eq!(err.location().map(|l| l.line), Some(3), "{}", msg);
    }
}

// ----------------------------------------------------------- control socket

/// Near-valid request lines: the real ops and fields, wrong types, unknown
/// fields and ops, duplicate keys, truncation.
fn near_valid_request() -> impl Strategy<Value = Vec<u8>> {
    let op = prop_oneof![
        Just("\"list\"".to_owned()),
        Just("\"describe\"".to_owned()),
        Just("\"kill\"".to_owned()),
        Just("\"LIST\"".to_owned()),
        Just("null".to_owned()),
        Just("1".to_owned()),
        Just("[\"list\"]".to_owned()),
        "\"\\PC{0,12}\"".prop_map(|s| serde_json::to_string(&s[1..s.len() - 1]).unwrap()),
    ];
    let task = prop_oneof![
        Just("\"alpha\"".to_owned()),
        Just("\"β-task\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("null".to_owned()),
        Just("42".to_owned()),
        Just("{}".to_owned()),
        "\\PC{0,20}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    let field = prop_oneof![
        op.clone().prop_map(|v| format!("\"op\":{v}")),
        task.prop_map(|v| format!("\"task\":{v}")),
        Just("\"extra\":true".to_owned()),
        Just("\"op\":\"list\"".to_owned()),
    ];
    (
        proptest::collection::vec(field, 0..4),
        any::<proptest::sample::Index>(),
        0..4u8,
    )
        .prop_map(|(fields, cut, how)| {
            let mut line = format!("{{{}}}", fields.join(",")).into_bytes();
            match how {
                // A cut may split a character: the server gets bytes.
                0 => line.truncate(cut.index(line.len() + 1)),
                1 => line.push(b'\r'),
                2 => line = [b"  ", &line[..], b"  "].concat(),
                _ => {}
            }
            line
        })
}

/// Sends raw bytes as one request and returns the one response line.
fn raw_request(path: &Path, bytes: &[u8]) -> Result<serde_json::Value, String> {
    let mut stream = UnixStream::connect(path).map_err(|e| format!("connect: {e}"))?;
    let bound = Some(Duration::from_secs(10));
    stream.set_read_timeout(bound).unwrap();
    stream.set_write_timeout(bound).unwrap();
    // The server may answer (and close) before reading everything: a write
    // error here is fine, the response is what counts.
    let _ = stream
        .write_all(bytes)
        .and_then(|()| stream.write_all(b"\n"));
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut line = Vec::new();
    BufReader::new(stream)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("read: {e}"))?;
    if !line.ends_with(b"\n") {
        return Err(format!(
            "response without a newline: {:?}",
            String::from_utf8_lossy(&line)
        ));
    }
    serde_json::from_slice(&line).map_err(|e| format!("response is not JSON ({e}): {line:?}"))
}

// R6.5, R10.2: arbitrary bytes and near-valid JSON sent to a real control
// socket each get one JSON line with a boolean `ok` (an `error` string when
// false), and the server keeps serving well-formed clients after each.
#[test]
fn control_requests_always_get_one_response_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let _alpha = guard.start("alpha", Profile::default()).unwrap();
    let _beta = guard.start("β-task", Profile::default()).unwrap();
    let server = ControlServer::bind(dir.path().join("ctl.sock"), guard.clone()).unwrap();
    let path = server.path().to_owned();
    let requests = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        near_valid_request(),
    ];
    let mut runner = TestRunner::new(socket_config());
    runner
        .run(&requests, |bytes| {
            let reply = raw_request(&path, &bytes).map_err(TestCaseError::fail)?;
            match reply.get("ok") {
                Some(serde_json::Value::Bool(true)) => prop_assert!(
                    reply.get("tasks").is_some_and(|t| t.is_array())
                        || reply.get("task").is_some_and(|t| t.is_object()),
                    "{reply}"
                ),
                Some(serde_json::Value::Bool(false)) => prop_assert!(
                    reply["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "{reply}"
                ),
                _ => prop_assert!(false, "no boolean ok: {reply}"),
            }
            // The canonical list request is answered as such (stricter
            // forms, duplicate keys say, may be refused: that is fine).
            let first_line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            let first_line = first_line.strip_suffix(b"\r").unwrap_or(first_line);
            if first_line.trim_ascii() == br#"{"op":"list"}"# {
                prop_assert_eq!(&reply["ok"], true, "{}", reply);
            }
            let listed = raw_request(&path, br#"{"op":"list"}"#).map_err(TestCaseError::fail)?;
            prop_assert_eq!(
                listed["tasks"].as_array().map(Vec::len),
                Some(2),
                "{}",
                listed
            );
            Ok(())
        })
        .unwrap();
}

// --------------------------------------------------------------- sd_notify

/// Datagrams built from the protocol's vocabulary with wrong values,
/// missing `=`, stray bytes and oversize padding.
fn near_valid_datagram() -> impl Strategy<Value = Vec<u8>> {
    let assignment = prop_oneof![
        Just("WATCHDOG=1".to_owned()),
        Just("WATCHDOG=2".to_owned()),
        Just("WATCHDOG=trigger".to_owned()),
        Just("READY=1".to_owned()),
        Just("READY=yes".to_owned()),
        Just("BARRIER=1".to_owned()),
        Just("MAINPID=42".to_owned()),
        Just("=1".to_owned()),
        Just("WATCHDOG".to_owned()),
        (0..u64::MAX).prop_map(|n| format!("EXTEND_TIMEOUT_USEC={n}")),
        "EXTEND_TIMEOUT_USEC=[0-9a-z-]{0,22}".prop_map(|s| s),
        "STATUS=\\PC{0,300}".prop_map(|s| s),
        "[A-Z_]{0,12}=?[a-z0-9]{0,8}".prop_map(|s| s),
    ];
    (
        proptest::collection::vec(assignment, 0..6),
        prop_oneof![Just("\n"), Just("\n\n"), Just("\r\n")],
        0..8u8,
    )
        .prop_map(|(lines, sep, how)| {
            let mut bytes = lines.join(sep).into_bytes();
            match how {
                0 => bytes.push(0),
                1 => bytes.extend_from_slice(b"\xff\xfe"),
                2 => bytes.resize(MAX_DATAGRAM + 1, b'a'),
                _ => {}
            }
            bytes
        })
}

/// How many malformed counts the socket should add for one datagram.
/// The refusals the parser finds in `datagram`, by the key the task counts
/// them under (R10.6).
fn expected_malformed(datagram: &[u8]) -> std::collections::BTreeMap<&'static str, u64> {
    let mut keys = std::collections::BTreeMap::new();
    let reasons = match Notification::parse_datagram(datagram) {
        Err(reason) => vec![reason],
        Ok(lines) => lines.into_iter().filter_map(Result::err).collect(),
    };
    for reason in reasons {
        *keys.entry(reason.key()).or_default() += 1;
    }
    keys
}

fn datagrams() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..(MAX_DATAGRAM + 64)),
        near_valid_datagram(),
    ]
}

proptest! {
    // R5.4, R10.2: any bytes parse to assignments or one reason, never a
    // panic; the parse is bounded (oversize refused whole, statuses cut to
    // MAX_STATUS with no control characters) and one result per line.
    #[test]
    fn any_datagram_parses_or_is_refused_with_a_reason(datagram in datagrams()) {
        match Notification::parse_datagram(&datagram) {
            Err(reason) => {
                if datagram.len() > MAX_DATAGRAM {
                    prop_assert_eq!(reason, Malformed::Oversize);
                }
                prop_assert!(!reason.to_string().is_empty());
            }
            Ok(lines) => {
                prop_assert!(datagram.len() <= MAX_DATAGRAM);
                let text = std::str::from_utf8(&datagram).unwrap();
                prop_assert_eq!(lines.len(), text.split('\n').filter(|l| !l.is_empty()).count());
                for line in lines.iter().flatten() {
                    if let Notification::Status(s) = line {
                        prop_assert!(s.len() <= MAX_STATUS, "{} bytes", s.len());
                        prop_assert!(!s.chars().any(char::is_control), "{s:?}");
                    }
                }
            }
        }
    }
}

// R5.4, R10.2: the same datagrams sent to a real notify socket: each is
// received, malformed ones (and malformed lines) raise the malformed
// counter by exactly what the parser says, and the socket keeps serving.
#[test]
fn a_real_notify_socket_counts_malformed_datagrams_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("svc", Profile::default()).unwrap();
    let socket = NotifySocket::bind_in(dir.path(), task.recorder()).unwrap();
    let client = UnixDatagram::unbound().unwrap();
    let mut runner = TestRunner::new(socket_config());
    runner
        .run(&datagrams(), |datagram| {
            let before = socket.stats();
            let refused_before = socket.malformed_by_reason();
            client
                .send_to(&datagram, socket.path())
                .map_err(|e| TestCaseError::fail(format!("send: {e}")))?;
            prop_assert!(
                socket.wait_for_datagrams(before.datagrams + 1, Duration::from_secs(10)),
                "datagram {} was never handled",
                before.datagrams + 1
            );
            let expected = expected_malformed(&datagram);
            prop_assert_eq!(
                socket.malformed() - refused_before.values().sum::<u64>(),
                expected.values().sum::<u64>(),
                "{:?}",
                String::from_utf8_lossy(&datagram)
            );
            // R10.6: the task counted each by its reason's key.
            let mut grew = socket.malformed_by_reason();
            for (key, n) in &refused_before {
                *grew.get_mut(key).unwrap() -= n;
            }
            grew.retain(|_, n| *n != 0);
            prop_assert_eq!(grew, expected);
            Ok(())
        })
        .unwrap();
    // Still serving: a plain heartbeat is taken.
    let (heartbeats, sent) = (socket.heartbeats(), socket.datagrams());
    client.send_to(b"WATCHDOG=1", socket.path()).unwrap();
    assert!(socket.wait_for_datagrams(sent + 1, Duration::from_secs(10)));
    assert_eq!(socket.heartbeats(), heartbeats + 1);
}
