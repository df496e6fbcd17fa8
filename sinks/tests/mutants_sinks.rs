//! Tests that kill surviving mutants of `stallwarden-sinks` found by the
//! 1-in-10 round-robin cargo-mutants sample (issue 14, R10.4). Several of
//! these behaviours are shown in doctests, which mutant runs skip
//! (`.cargo/mutants.toml`), so each is pinned here as a test as well.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use metrics::Unit;
use metrics_util::debugging::DebuggingRecorder;
use stallwarden_sinks::callback::CallbackSink;
use stallwarden_sinks::metrics::{MetricsSink, LAST_PROGRESS};
use stallwarden_sinks::monitor::{clean_output, redact, MonitorFinal, MonitorUpdate};
use stallwarden_sinks::process::{
    group_members, reap, GroupSignal, KillOutcome, KillReport, ProcessSink, Reaped,
};
use stallwarden_sinks::token::CancelTokenSink;
use stallwarden_sinks::trace::TracingSink;
use watchdog_core::{Delivery, Guard, ManualClock, Outcome, Profile, Sink, TaskState};

// R8.7/R6.4: a failing sink is reported by its name, so each sink names
// itself (kills the `name -> ""` / `"xyzzy"` mutants of the callback,
// metrics and tracing sinks).
#[test]
fn sinks_report_failures_under_their_own_names() {
    assert_eq!(CallbackSink::new(|_| {}).name(), "callback");
    assert_eq!(CallbackSink::new(|_| {}).named("ui").name(), "ui");
    assert_eq!(MetricsSink::new().name(), "metrics");
    assert_eq!(TracingSink::new().name(), "tracing");
    // Shard 3/10 (issue 26): `<impl Sink for CancelTokenSink>::name -> "xyzzy"`.
    assert_eq!(CancelTokenSink::new().name(), "cancel-token");
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

// R6.8: the exported series carry their unit and help text (a Prometheus
// `# HELP` line), registered by `describe` (kills `describe -> ()`).
#[test]
fn describe_gives_every_series_its_unit_and_help() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        MetricsSink::describe();
        metrics::gauge!(LAST_PROGRESS).set(1.0);
    });
    let all = snap.snapshot().into_vec();
    let (_, unit, help, _) = all
        .iter()
        .find(|(k, ..)| k.key().name() == LAST_PROGRESS)
        .expect("the gauge was set");
    assert_eq!(*unit, Some(Unit::Seconds));
    assert_eq!(
        help.as_deref(),
        Some("Unix time of the last progress signal")
    );
}

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

// R8.6/R3.4: an unconfirmed kill lists the pids still running, comma
// separated (kills `>` for `==` in the separator test of the report).
#[test]
fn an_unconfirmed_kill_lists_the_pids_left() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("build", Profile::default()).unwrap();
    let report = KillReport {
        task: task.id(),
        name: Arc::from("build"),
        pgid: 40,
        signal: GroupSignal::Kill,
        outcome: KillOutcome::Unconfirmed {
            left: vec![41, 42, 43],
        },
    };
    assert_eq!(
        report.to_string(),
        "task build: SIGKILL to process group 40: cleanup unconfirmed, still running: 41, 42, 43"
    );
}

// R3.4: what is left of a group after a kill is found through /proc; this
// test process is a member of its own group (kills
// `group_members -> Ok(vec![])`).
#[test]
fn group_members_finds_this_process_in_its_group() {
    let me = std::process::id();
    let group = nix::unistd::getpgrp().as_raw() as u32;
    assert!(group_members(group).unwrap().contains(&me));
}

// R6.6: the output shown to a monitor has carriage returns folded: CRLF is
// one line break, a lone CR (a progress bar redraw) is a line break too
// (kills `!=` for `==` in `clean_output`).
#[test]
fn carriage_returns_become_single_line_breaks() {
    assert_eq!(clean_output(b"a\r\nb\rc\n"), "a\nb\nc\n");
}

// R6.6: colour and cursor sequences (CSI, as cargo and pytest print them)
// and window titles (OSC, ended by BEL or ESC \\) leave no trace in what the
// monitor reads; the text around them stays.
#[test]
fn escape_sequences_are_dropped_whole() {
    assert_eq!(
        clean_output(b"\x1b[1m\x1b[32m   Compiling\x1b[0m core v0.1.0\n"),
        "   Compiling core v0.1.0\n"
    );
    assert_eq!(clean_output(b"\x1b[2K\x1b[1Gdone\n"), "done\n");
    assert_eq!(clean_output(b"\x1b]0;build\x07ok\n"), "ok\n");
    assert_eq!(clean_output(b"\x1b]0;build\x1b\\ok\n"), "ok\n");
}

// R6.6: a bare `Bearer <token>` (a curl line, a log) is masked on its own,
// without an `Authorization:` key before it (kills `<` for `==` in the
// bearer scan's bound).
#[test]
fn a_bare_bearer_token_is_masked() {
    assert_eq!(
        redact("curl -H 'X-Auth: Bearer abcdefgh.1234_xyz' https://api"),
        "curl -H 'X-Auth: Bearer [REDACTED]' https://api"
    );
}

// R6.6: only the word `bearer` introduces a token; any other six-letter
// word followed by a long word is left alone (kills `&&` for `||` in the
// bearer scan).
#[test]
fn a_six_letter_word_before_a_long_one_is_not_a_bearer() {
    let text = "passed 12345678 tests, failed 0";
    assert_eq!(redact(text), text);
}

// R6.6: a PEM key block is masked up to its closing dashes; what follows
// on the END line stays (kills `+` for `*` in finding the closing dashes).
#[test]
fn text_after_a_pem_end_marker_on_its_line_stays() {
    let text = "key follows:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY----- (2048 bits)\nnext";
    assert_eq!(
        redact(text),
        "key follows:\n[REDACTED PRIVATE KEY] (2048 bits)\nnext"
    );
}

// R6.6: a key block whose BEGIN fell out of the tail window is masked back
// over its base64 lines, and the line before it keeps its line break
// (kills `+` for `*` in finding the start of the END line).
#[test]
fn an_orphan_pem_end_is_masked_back_to_its_base64_lines() {
    let text = "tail of a log\nMIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----\nnext";
    assert_eq!(redact(text), "tail of a log\n[REDACTED PRIVATE KEY]\nnext");
    // Only the END line left: the line before it keeps its line break.
    assert_eq!(
        redact("tail of a log\n-----END PRIVATE KEY-----\nnext"),
        "tail of a log\n[REDACTED PRIVATE KEY]\nnext"
    );
}

// R6.6: a certificate is not a secret (TLS debugging prints them): it is
// kept, and the private key after it is still masked.
#[test]
fn a_certificate_is_kept_and_the_key_after_it_masked() {
    let text = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n\
                -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\nok";
    assert_eq!(
        redact(text),
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n\
         [REDACTED PRIVATE KEY]\nok"
    );
}

// R6.6: an END whose BEGIN is missing is masked back over its base64 lines
// even after a whole block earlier in the text.
#[test]
fn an_orphan_pem_end_after_a_whole_block_is_masked_too() {
    let text = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n\
                log line\nkqhkiG9w0BAQEF\n-----END RSA PRIVATE KEY-----\nnext";
    assert_eq!(
        redact(text),
        "[REDACTED PRIVATE KEY]\nlog line\n[REDACTED PRIVATE KEY]\nnext"
    );
}

// R6.6: spaces before the separator still leave the key a secret's name
// (kills `>` for `<` in the key walk of `pairs`).
#[test]
fn a_spaced_out_secret_pair_is_masked() {
    assert_eq!(redact("password = hunter2"), "password = [REDACTED]");
}

// R6.6/R10.2: a separator at the very start of the text has no key; it is
// kept as is, never a panic (kills `>` for `>=` in the quote check).
#[test]
fn a_separator_at_the_start_is_kept_without_a_panic() {
    for text in ["=x", ": value", "= 1"] {
        assert_eq!(redact(text), text);
    }
}

// R6.6: only a flag naming a secret hides its value, and only a flag that
// starts a word (kills `||` for `&&` and `>` for `<` in `flags`).
#[test]
fn only_secret_flags_that_start_a_word_hide_their_value() {
    assert_eq!(
        redact("mysql --password hunter2 --user admin"),
        "mysql --password [REDACTED] --user admin"
    );
    for text in ["cargo test --package core", "see page--token counts below"] {
        assert_eq!(redact(text), text);
    }
}

// R6.6: only `user:password@` in a URL is a password; a `host:port` is
// not, at the end of the text neither (kills `&&` for `||` in
// `url_passwords`, which masked ports and indexed past the end).
#[test]
fn a_url_port_is_not_a_password() {
    assert_eq!(
        redact("fetch https://bot:s3cr3t@example.com/x"),
        "fetch https://bot:[REDACTED]@example.com/x"
    );
    for text in ["GET http://localhost:8080/health ok", "see http://host:80"] {
        assert_eq!(redact(text), text);
    }
}

// --- Shard 3/10 survivors (issue 26, R10.4) ---

// R6.6/R10.2: a secret flag at the very end of the output (a command line
// cut by the tail window, `--password ` with nothing after it) is kept as
// is, never a panic (kills `<` for `<=` in `e + 1 < b.len()` in `flags`,
// which indexed past the end).
#[test]
fn a_secret_flag_at_the_end_of_the_text_is_kept_without_a_panic() {
    for text in ["mysql --password ", "mysql --password", "run --token  "] {
        assert_eq!(redact(text), text);
    }
}

// R6.6: a URL with an empty password (`user:@host`) has nothing to mask,
// and the output is not altered (kills `>` for `>=` in `url_passwords`,
// which inserted `[REDACTED]` into the URL).
#[test]
fn a_url_with_an_empty_password_is_left_alone() {
    let text = "git clone https://bot:@example.com/repo.git";
    assert_eq!(redact(text), text);
}

// R6.4/R3.4: a kill that could not confirm the group gone, with no member
// pid left to name (the group still answers), says so rather than listing
// nothing (kills the `left.is_empty()` match guard replaced with `false`).
#[test]
fn an_unconfirmed_kill_with_no_pid_left_says_the_group_still_answers() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("build", Profile::default()).unwrap();
    let report = KillReport {
        task: task.id(),
        name: Arc::from("build"),
        pgid: 40,
        signal: GroupSignal::Kill,
        outcome: KillOutcome::Unconfirmed { left: vec![] },
    };
    assert_eq!(
        report.to_string(),
        "task build: SIGKILL to process group 40: cleanup unconfirmed, the group still answers"
    );
}

// R8.7/R6.4: the process sink reports its failures under its own name
// (kills `<impl Sink for ProcessSink>::name -> ""`).
#[test]
fn the_process_sink_names_itself() {
    assert_eq!(ProcessSink::new().name(), "process");
}

// R6.4: `reap` waits up to its bound for a child that is still running and
// returns how it ended (kills `>=` for `<` in `reap`, which gave up with
// `Ok(None)` at once). A real child that runs for half a second; the
// bound is generous and no duration is asserted.
#[test]
fn reap_waits_within_its_bound_for_a_running_child() {
    let child = std::process::Command::new("sleep")
        .arg("0.5")
        .spawn()
        .unwrap();
    let pid = child.id();
    std::mem::forget(child); // a runner without a `Child` of its own
    assert_eq!(
        reap(pid, Duration::from_secs(60)).unwrap(),
        Some(Reaped::Exited(0))
    );
    // Reaped once: a second reap names the pid in its error.
    let err = reap(pid, Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains(&pid.to_string()), "{err}");
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

// R6.6: a token prefix masks only a body of at least its minimum length
// (16 after `sk-`), counted without the prefix: a short hyphenated word that
// starts like a key is ordinary output (kills `-` for `+` in
// `prefixed_tokens`, which counted the prefix twice and masked the word).
#[test]
fn a_key_prefix_with_a_short_body_is_not_a_secret() {
    let text = "pip install sk-video-utils";
    assert_eq!(redact(text), text);
    // 16 characters after the prefix: a key.
    assert_eq!(
        redact("key sk-abcdefgh12345678 set"),
        "key sk-[REDACTED] set"
    );
}

// --- The whole-crate run (issue 26, R10.4) -------------------------------

/// Every log line of this test binary, from a global `tracing` subscriber:
/// isolated sinks log on their own threads.
fn logs() -> String {
    use std::sync::{Mutex, OnceLock};
    #[derive(Clone)]
    struct Lines(&'static Mutex<Vec<u8>>);
    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static LOG: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    let buf = *LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::default());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || Lines(buf))
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        buf
    });
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

// R8.7: every sink names itself, for the errors and logs that cite it.
#[test]
fn the_channel_and_json_lines_sinks_name_themselves() {
    use stallwarden_sinks::channel::ChannelSink;
    use stallwarden_sinks::jsonl::JsonLinesSink;
    assert_eq!(ChannelSink::new().name(), "channel");
    assert_eq!(JsonLinesSink::new(Vec::new()).name(), "jsonl");
}

// R3.8: a subscription by name follows one run. One channel sink shared by
// two guards (cloning shares the subscriber list) sees two live tasks of
// that name; the subscription keeps to the first it saw, by task id.
#[test]
fn a_name_subscription_keeps_to_the_first_task_it_saw() {
    use stallwarden_sinks::channel::ChannelSink;
    let sink = ChannelSink::new();
    let mut build = sink.subscribe_task("build");
    let one = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let two = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let _other = one.start("lint", Profile::default()).unwrap(); // id 1 in `one`
    let first = one.start("build", Profile::default()).unwrap(); // id 2
    let second = two.start("build", Profile::default()).unwrap(); // id 1 in `two`
    second.finish_completed();
    first.finish_completed();
    let got: Vec<_> = build
        .drain()
        .into_iter()
        .map(|e| (e.task, e.kind.type_name()))
        .collect();
    assert_eq!(got, [(first.id(), "started"), (first.id(), "finished")]);
}

// R3.8: an empty queue is not a closed one; and a subscription polled by
// hand hands out what is queued.
#[test]
fn a_subscription_polled_by_hand_yields_what_is_queued() {
    use stallwarden_sinks::channel::{ChannelSink, TryRecvError};
    use std::task::{Context, Poll, Waker};
    assert!(!TryRecvError::Empty.is_closed());
    assert!(TryRecvError::Closed.is_closed());
    let sink = ChannelSink::new();
    let mut all = sink.subscribe();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(all.poll_recv(&mut cx).is_pending());
    let _task = guard.start("polled", Profile::default()).unwrap();
    match all.poll_recv(&mut cx) {
        Poll::Ready(Some(e)) => assert_eq!(e.kind.type_name(), "started"),
        other => panic!("{other:?}"),
    }
}

// R3.8: the JSON lines sink remembers the last 65 536 finished tasks, so a
// late event of any of them is dropped; the one before them is forgotten.
#[test]
fn the_json_lines_sink_remembers_exactly_the_last_65536_finished_tasks() {
    use stallwarden_sinks::jsonl::JsonLinesSink;
    use watchdog_core::{RecordingSink, TaskId};
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    guard
        .start("t", Profile::default())
        .unwrap()
        .finish_completed();
    let events = rec.events();
    let (started, finished) = (&events[0], &events[1]);
    let sink = JsonLinesSink::new(std::io::sink());
    let with_id = |e: &watchdog_core::Event, id: u64| {
        let mut e = e.clone();
        e.task = TaskId::from_raw(id);
        e
    };
    for id in 1..=65_536 {
        sink.on_event(&with_id(finished, id)).unwrap();
    }
    sink.on_event(&with_id(started, 1)).unwrap();
    assert_eq!(sink.late_dropped(), 1, "task 1 is among the last 65 536");
    sink.on_event(&with_id(finished, 65_537)).unwrap();
    sink.on_event(&with_id(started, 1)).unwrap();
    sink.on_event(&with_id(started, 2)).unwrap();
    assert_eq!(sink.late_dropped(), 2, "task 1 forgotten, task 2 not");
}

// R6.5: folding updates joins their output with one line break between
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

// R8.6: only an unconfirmed kill reads as unconfirmed.
#[test]
fn only_an_unconfirmed_kill_is_unconfirmed() {
    let report = |outcome| KillReport {
        task: watchdog_core::TaskId::from_raw(1),
        name: "k".into(),
        pgid: 4242,
        signal: GroupSignal::Kill,
        outcome,
    };
    assert!(report(KillOutcome::Unconfirmed { left: vec![4243] }).is_unconfirmed());
    for other in [
        KillOutcome::Sent,
        KillOutcome::AlreadyGone,
        KillOutcome::Confirmed {
            after: Duration::ZERO,
        },
        KillOutcome::Refused { reason: "r".into() },
        KillOutcome::Failed { error: "e".into() },
    ] {
        assert!(!report(other.clone()).is_unconfirmed(), "{other:?}");
    }
}

// R6.4, R8.7: a refused signal is logged as a warning that says why, not
// as a signal sent.
#[test]
fn a_refused_signal_is_logged_as_a_warning_with_its_reason() {
    logs();
    let procs = ProcessSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(procs.clone())
        .build();
    let p = Profile::default()
        .idle(Duration::from_millis(200))
        .heartbeat_interval(None);
    let _task = guard.start_process("refused-one", p, 1).unwrap();
    guard.advance(Duration::from_millis(200));
    procs
        .wait_for(|_| true, Duration::from_secs(10))
        .expect("a report");
    let log = logs();
    let line = log
        .lines()
        .find(|l| l.contains("refused-one"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("signal refused"), "{line}");
    assert!(line.contains("pid 1 is never signalled"), "{line}");
}

// R8.6: waiting for a group to be gone waits for it, within the bound: a
// group whose last member exits after a while is confirmed gone, not
// reported unconfirmed at the first look.
#[test]
fn a_group_that_ends_within_the_bound_is_confirmed_gone() {
    use stallwarden_sinks::process::wait_group_gone;
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new("sleep")
        .arg("0.3")
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id();
    let waiter = std::thread::spawn(move || child.wait().unwrap());
    let gone = wait_group_gone(pgid, Duration::from_secs(30));
    assert!(matches!(gone, KillOutcome::Confirmed { .. }), "{gone:?}");
    assert!(waiter.join().unwrap().success());
}

// R8.6: pid 1 (and 0) are never waited on: they are refused as invalid
// before any waitpid, whose "not a child" would hide the caller's mistake.
#[test]
fn reap_refuses_pid_zero_and_one_as_invalid() {
    for pid in [0, 1] {
        let err = reap(pid, Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(&format!("pid {pid}")), "{err}");
    }
}

// R6.6: an AWS access key id is AKIA or ASIA and exactly 16 upper-case
// letters or digits; shorter look-alikes are ordinary words.
#[test]
fn only_a_whole_aws_key_id_is_masked() {
    assert_eq!(redact("id AKIAIOSFODNN7EXAMPLE ok"), "id [REDACTED] ok");
    assert_eq!(
        redact("see AKIAEXAMPLE12 in the docs"),
        "see AKIAEXAMPLE12 in the docs"
    );
}

// R6.6: `bearer` as a word is masked only with a space and a long token
// after it: prose, a word that merely starts with it, and trailing spaces
// are left alone (and never index past the text).
#[test]
fn bearer_needs_a_space_and_a_long_token() {
    for text in [
        "the bearer of bad news",
        "bearertokens1234567890 is one word",
        "sent as bearer   ",
    ] {
        assert_eq!(redact(text), text);
    }
    assert_eq!(
        redact("sent as bearer 0123456789abcdef"),
        "sent as bearer [REDACTED]"
    );
}

// R6.6: `==` is a comparison, not a pair; `=/` starts a secret path value,
// while `:/` starts a URL; a single-quoted key (a Python dict) is a key.
#[test]
fn pairs_tell_comparisons_urls_and_quoted_keys_apart() {
    for text in ["assert token == expected", "secret://vault/db"] {
        assert_eq!(redact(text), text);
    }
    assert_eq!(redact("password=/run/secrets/db"), "password=[REDACTED]");
    assert_eq!(
        redact("{'password': 'hunter2', 'user': 'ci'}"),
        "{'password': '[REDACTED]', 'user': 'ci'}"
    );
}

// R6.6: a secret flag in help text (`mysql --help`: `--password[=name]`),
// one that ends the text and one followed by another flag (mysql then
// prompts) have no value to hide; an empty value is not masked into one.
#[test]
fn help_text_a_trailing_flag_and_an_empty_value_are_left_alone() {
    for text in [
        "  -p, --password[=name]\n",
        "mysql --password ",
        "mysql --password --user admin",
        "password=\"\" user=ci",
        "password=; user=ci",
    ] {
        assert_eq!(redact(text), text);
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
    use stallwarden_sinks::monitor::{MonitorAgent, RuleMonitor};
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
    use stallwarden_sinks::monitor::{MonitorAgent, RuleMonitor};
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
    use stallwarden_sinks::monitor::{MonitorAgent, RuleMonitor};
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

// R6.6: two secrets in one text are masked each on its own; the text
// between them stays.
#[test]
fn two_secrets_are_masked_apart() {
    assert_eq!(
        redact("password=a1b2 user=ci token=c3d4"),
        "password=[REDACTED] user=ci token=[REDACTED]"
    );
}

// R6.6: a monitor target says the command it describes.
#[test]
fn a_monitor_target_says_its_command() {
    use stallwarden_sinks::monitor::MonitorTarget;
    let target = MonitorTarget::new("cargo build --release", Vec::new).cwd("/work");
    assert_eq!(target.command(), "cargo build --release");
}

/// Threads of this process whose name starts `stallwarden-mon` (a name is
/// cut to 15 bytes): monitor pollers and workers. No other test in this
/// binary starts any.
fn monitor_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("stallwarden-mon"))
        .count()
}

// R6.6, R8.6: the monitor sink names itself, and dropping it stops its
// poller thread (nothing left running); the poller is asleep with no
// monitor open, so only the drop can wake it. A new thread takes its name
// itself once it runs, so both counts are waited for, within a bound.
#[test]
fn a_dropped_monitor_sink_leaves_no_poller_behind() {
    use stallwarden_sinks::monitor::MonitorSink;
    let settles_at = |n: usize| {
        let bound = std::time::Instant::now() + Duration::from_secs(30);
        while monitor_threads() != n && std::time::Instant::now() < bound {
            std::thread::yield_now();
        }
        monitor_threads()
    };
    assert_eq!(monitor_threads(), 0);
    let sink = MonitorSink::rule_based().build().unwrap();
    assert_eq!(sink.name(), "monitor");
    assert_eq!(settles_at(1), 1, "the poller");
    drop(sink);
    assert_eq!(settles_at(0), 0, "the poller is still running");
}

// R6.6: the rule monitor counts the output lines it has read, across
// updates, and says so when it notes plain progress.
#[test]
fn the_rule_monitor_counts_output_lines() {
    use stallwarden_sinks::monitor::{MonitorAgent, RuleMonitor};
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
