//! R5.12: what a line's fingerprint keeps and what it sets aside. A
//! clock, a date, a duration, a spinner frame or a retry counter is set
//! aside; everything else (a percent, a count, `3/5`, a name, a result, a
//! value) is kept, and what only looks like a time is kept too. The lines
//! are shaped like real loggers' and tools' output; `tests/repeats.rs`
//! has the first cases and the window. Last, how a repeated line is shown.

use std::collections::HashMap;

use watchdog_core::repeat::fingerprint;

mod common;
use common::{differ, same};
use watchdog_core::{Guard, ManualClock, Profile, SignalKind};

// R5.12: only the value of a key that names a time (`ts=`, `elapsed=`)
// is set aside; any other `key=value` keeps its value, a result.
#[test]
fn a_key_value_pair_keeps_its_value_unless_its_key_names_a_time() {
    differ(
        "ts=1733600000 path=/health status=503",
        "ts=1733600001 path=/health status=200",
    );
    differ("job=build state=running", "job=build state=failed");
    same(
        "ts=1733600000 elapsed=1.2 job=build state=running",
        "ts=1733600009 elapsed=9.7 job=build state=running",
    );
}

// R5.12: a retry counter is the few words after a retry word (`retry 2 of
// 5`); a count after it is work and kept.
// R5.12: a value written after a key spaced from its sign
// (`printf("time =%s")`) is read as the key's value: a clock there is set
// aside, so the loop printing it is seen to repeat; a count stays kept.
#[test]
fn a_clock_after_a_spaced_key_is_set_aside() {
    same("time =12:00:01 waiting", "time =12:00:02 waiting");
    same("wait =5 seconds", "wait =6 seconds");
    differ("rows =41", "rows =42");
}

#[test]
fn a_count_after_a_retry_counter_is_kept() {
    same(
        "sync retry 2 of 5: 118 files pending",
        "sync retry 3 of 5: 118 files pending",
    );
    differ(
        "sync retry 2 of 5: 118 files pending",
        "sync retry 2 of 5: 119 files pending",
    );
}

// R5.12: what follows a retry word and is no counter is the line's news:
// why it failed, where it reconnects to.
#[test]
fn the_words_after_a_retry_word_that_are_no_counter_are_kept() {
    differ(
        "retry failed: connection refused",
        "retry failed: host unreachable",
    );
    same(
        "reconnect to 10.0.0.5:5432 (attempt 3)",
        "reconnect to 10.0.0.5:5432 (attempt 4)",
    );
    differ("reconnect to 10.0.0.5:5432", "reconnect to 10.0.0.6:5432");
    differ("retrying 10.0.0.5", "retrying 10.0.0.6");
}

// R5.12: only a number just before a retry word is its counter (`3
// attempts`); any other word there is kept, as docker's layer ids before
// its countdown.
#[test]
fn the_word_before_a_retry_word_is_kept_unless_it_is_a_number() {
    same(
        "3ed95caeb02f: Retrying in 5 seconds",
        "3ed95caeb02f: Retrying in 4 seconds",
    );
    differ(
        "3ed95caeb02f: Retrying in 5 seconds",
        "4f1e9a2c3d4b: Retrying in 5 seconds",
    );
}

// R5.12: a number before a unit word is a duration's, a fraction
// included (`1.5 seconds`, `5 min`).
#[test]
fn a_number_before_a_unit_word_is_set_aside_as_a_duration() {
    same(
        "connection refused, backing off for 1.5 seconds",
        "connection refused, backing off for 2.5 seconds",
    );
    same(
        "sleeping 5 min before the next check",
        "sleeping 10 min before the next check",
    );
    same("next poll in 3 s", "next poll in 30 s");
    // A number before any other word is a count.
    differ("copied 5 files", "copied 6 files");
}

// R5.12: a duration with several parts or a micro sign is a duration.
#[test]
fn a_duration_in_parts_or_in_microseconds_is_set_aside() {
    same("build step done in 2m30s", "build step done in 3m15s");
    same("build step done in 1h30m", "build step done in 2h5m");
    same("poll took 350µs", "poll took 12µs");
    same("poll took 350us", "poll took 12us");
}

// R5.12: an ISO date-time with a zone offset is set aside whole, zone and
// fraction included (Python's `isoformat()`, RFC 3339).
#[test]
fn a_timestamp_with_a_zone_offset_is_set_aside() {
    same(
        "2026-12-07T20:55:13+01:00 heartbeat",
        "2026-12-07T20:55:14+01:00 heartbeat",
    );
    same(
        "2026-12-07T20:55:13-05:00 heartbeat",
        "2026-12-08T09:00:00-05:00 heartbeat",
    );
    same(
        "2026-12-07T20:55:13.123456+00:00 heartbeat",
        "2026-12-07T20:55:14.654321+00:00 heartbeat",
    );
    same(
        "2026-12-07T20:55:13+0100 heartbeat",
        "2026-12-07T21:00:00+0100 heartbeat",
    );
    differ(
        "2026-12-07T20:55:13+01:00 heartbeat",
        "2026-12-07T20:55:13+01:00 shutdown",
    );
}

// R5.12: a zone written as a word of its own is a clock too: a daylight
// saving change moves it with the time.
#[test]
fn a_zone_offset_written_apart_is_set_aside() {
    same(
        "2026-03-29 01:59:59 +01:00 heartbeat",
        "2026-03-29 03:00:00 +02:00 heartbeat",
    );
    same(
        "2026-03-08 01:59:59 -05:00 heartbeat",
        "2026-03-08 03:00:00 -04:00 heartbeat",
    );
}

// R5.12: a date written day first or month first, with a four-digit
// year, is set aside.
#[test]
fn a_date_with_its_year_last_is_set_aside() {
    same(
        "12/07/2026 nightly backup done",
        "12/08/2026 nightly backup done",
    );
    same(
        "07-12-2026 nightly backup done",
        "08-12-2026 nightly backup done",
    );
}

// R5.12: a clock with three-digit hours (a long run's elapsed time) is a
// clock.
#[test]
fn a_clock_past_a_hundred_hours_is_set_aside() {
    same("[100:00:01] still running", "[100:00:02] still running");
}

// R5.12: a word only shaped like a time is kept: a port mapping, a
// ratio, a MAC address, a page range, a disk size, a phone number, an
// invoice number, a file extension.
#[test]
fn a_word_only_shaped_like_a_time_is_kept() {
    differ("publishing port 8080:80", "publishing port 9090:80");
    differ("scaling video to 16:9", "scaling video to 4:3");
    differ(
        "link up on 0a:00:27:00:00:05",
        "link up on 0a:00:27:00:00:06",
    );
    differ(
        "Overfull \\hbox in paragraph at lines 1234--1240",
        "Overfull \\hbox in paragraph at lines 1250--1256",
    );
    differ("/dev/sdb1 10T used", "/dev/sdb1 12T used");
    differ("call 1-800-555-0199", "call 1-800-555-0198");
    differ(
        "processing invoice 2026-INV-0042",
        "processing invoice 2026-INV-0043",
    );
    differ("skipping .h files", "skipping .m files");
}

// R5.12: a clock glued to other text (a CSV row) is no word of its own:
// the word is kept whole, so the text in it still counts.
#[test]
fn a_clock_glued_to_other_text_keeps_the_text() {
    differ("12:00:01,build,running", "12:00:01,build,failed");
}

// R5.12: everything else is kept as it is, byte for byte: a NUL a
// program writes (`find -print0`) is part of its word.
#[test]
fn a_nul_byte_is_part_of_its_word() {
    assert_ne!(
        fingerprint(b"found ./src/main.rs\0"),
        fingerprint(b"found ./src/main.rs")
    );
}

// R5.12: a spinner frame or bare punctuation, dots included, is as if it
// were not there.
#[test]
fn bare_punctuation_is_as_if_it_were_not_there() {
    same("Connecting ...", "Connecting");
    same("Connecting ...", "Connecting ....");
    same("==> waiting for lock", "waiting for lock");
}

// R5.12: a new line must stay new: distinct counts of work never share a
// fingerprint, across many lines.
#[test]
fn many_lines_with_distinct_counts_have_distinct_fingerprints() {
    let mut seen = HashMap::new();
    for i in 0..20_000u32 {
        let line = format!("processed {i} rows");
        if let Some(other) = seen.insert(fingerprint(line.as_bytes()), line.clone()) {
            panic!("{other:?} and {line:?} share a fingerprint");
        }
    }
}

// R5.12: the line a stall says repeats is shown with its control
// characters replaced, a tab by a space and anything else (a colour's
// escape) by `?`, so the stall line carries no terminal sequence.
#[test]
fn a_repeated_line_is_shown_with_its_control_characters_replaced() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("job", Profile::default()).unwrap();
    let repeats = task.recorder().repeats();
    let line = b"\x1b[33mwaiting\tfor db\x1b[0m";
    assert_eq!(repeats.line(line), SignalKind::Output);
    assert_eq!(repeats.line(line), SignalKind::Repeat);
    let r = repeats.repeating().expect("what repeats");
    assert_eq!(r.shown, "?[33mwaiting for db?[0m");
}
