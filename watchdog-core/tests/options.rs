//! Options and durations as every door gives them (R10.6, R8.12): the
//! option table behind `Profile::set`, the TOML keys, the CLI's flags and
//! the bindings. Milliseconds and `"off"` mean the same everywhere, a bad
//! value is refused with its key and range (or, for a door that spells the
//! key its own way, without it) and changes nothing, and values are shown
//! as a person wrote them. The table-driven spellings of every door are
//! `doors.rs`; a profile's own ranges are `profile.rs`.
//!
//! Pure values: no guard, no clock.

use std::time::Duration;

use watchdog_core::{duration_from_millis, DurationError, Limit, OptionValue, Profile};

mod common;
use common::secs;

// ---------------------------------------------------------------------------
// Milliseconds and "off"
// ---------------------------------------------------------------------------

// R10.6: `0` milliseconds is a duration (zero), from Node and Python as
// from the builder; only a negative or NaN count is refused. (Mutant:
// `< with <=` in `duration_from_millis`, which refused 0.)
#[test]
fn zero_milliseconds_is_a_zero_duration_not_an_error() {
    assert_eq!(duration_from_millis(0.0), Ok(Duration::ZERO));
    assert_eq!(duration_from_millis(1.5), Ok(Duration::from_micros(1500)));
    assert!(matches!(
        duration_from_millis(-0.5),
        Err(DurationError::Invalid { .. })
    ));
    // Through the option table: 0 ms is off for the heartbeat (R3.7) and
    // an immediate kill for the grace period (R3.5).
    let mut p = Profile::default();
    p.set("gracePeriod", 0.0).unwrap();
    assert_eq!(p.grace_period, Duration::ZERO);
    p.set("heartbeat_interval", 0).unwrap();
    assert_eq!(p.heartbeat_interval, None);
}

// R8.12: milliseconds are accepted up to the longest duration, exactly.
#[test]
fn milliseconds_are_accepted_up_to_the_longest_duration() {
    let max = watchdog_core::MAX_DURATION;
    let max_ms = max.as_secs_f64() * 1000.0;
    assert_eq!(
        duration_from_millis(max_ms),
        Ok(Duration::from_secs_f64(max.as_secs_f64()))
    );
    assert!(duration_from_millis(max_ms * 1.01).is_err());
    // A year: far past the longest duration counted in seconds.
    assert_eq!(
        duration_from_millis(3.0e10),
        Ok(Duration::from_secs(30_000_000))
    );
}

// R8.12, R10.6: a number in an error is written as a person would write
// it: `1e300`, not three hundred digits, and `0`, not `0e0`. (Mutant:
// `!= with ==` in `number`.)
#[test]
fn numbers_in_errors_are_written_as_people_write_them() {
    let err = duration_from_millis(1e300).unwrap_err();
    assert_eq!(
        err,
        DurationError::TooLong {
            text: "1e300ms".into()
        }
    );
    let mut p = Profile::default();
    let err = p.set("long-running-after", 0.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "long-running-after is 0ms, expected 1ms..=30days"
    );
}

// R10.6: `"off"` turns a budget off from every door, however it is spaced.
// (Mutant: `delete match arm "off"` in `Limit::from_str`, which sent it to
// humantime and refused it.)
#[test]
fn off_is_a_limit_from_text() {
    assert_eq!(" off ".parse::<Limit>(), Ok(Limit::Off));
    let mut p = Profile::default();
    p.set("idle", "off").unwrap();
    assert_eq!(p.idle, None);
    p.set("heartbeat-interval", "off").unwrap();
    assert_eq!(p.heartbeat_interval, None);
}

// R10.6: values are shown as a person wrote them, in every error.
#[test]
fn option_values_and_limits_render_as_written() {
    assert_eq!(OptionValue::Null.to_string(), "null");
    assert_eq!(OptionValue::Bool(false).to_string(), "false");
    assert_eq!(OptionValue::Float(1.5).to_string(), "1.5");
    assert_eq!(OptionValue::from("90s").to_string(), "\"90s\"");
    assert_eq!(
        OptionValue::from(vec!["output", "cpu", "net"]).to_string(),
        "[\"output\", \"cpu\", \"net\"]"
    );
    assert_eq!(OptionValue::List(vec![]).to_string(), "[]");
    assert_eq!(Limit::Off.to_string(), "off");
    assert_eq!(Limit::After(secs(90)).to_string(), "1m 30s");
    // R7.2: a bare zero is zero in every unit; any other bare number needs one.
    assert_eq!(" 0 ".parse::<Limit>(), Ok(Limit::After(Duration::ZERO)));
    assert!("5".parse::<Limit>().is_err());
}

// ---------------------------------------------------------------------------
// Out of range, and the errors that say so
// ---------------------------------------------------------------------------

// R10.6: a duration out of its key's range names that range, the same
// text the builder's `validate` gives, not the generic "a duration such
// as ...". (Mutant: `delete field expected` in `OptionSpec::parse`.)
#[test]
fn an_out_of_range_option_names_its_range() {
    let mut p = Profile::default();
    let err = p.set("idle", "40days").unwrap_err();
    assert_eq!(err.to_string(), "idle is 40days, expected 1ms..=30days");
    let err = p.set("grace-period", 3_600_001).unwrap_err();
    assert_eq!(
        err.to_string(),
        "grace-period is 3600001ms, expected 0s..=1h"
    );
    assert_eq!(p, Profile::default(), "a refused value changes nothing");
}

// R3.2, R10.6: terminate-after takes 0..=1000 from every door; 1001 is
// refused with the range and leaves the profile as it was. (Mutant:
// `match guard n <= MAX_STRIKES with true` in `OptionSpec::parse`.)
#[test]
fn terminate_after_above_a_thousand_is_refused() {
    let mut p = Profile::default();
    p.set("terminate-after", 1000).unwrap();
    assert_eq!(p.terminate_after, 1000);
    for value in [OptionValue::from(1001), OptionValue::from("1001")] {
        let err = p.set("terminateAfter", value).unwrap_err();
        assert_eq!(
            err.to_string(),
            "terminateAfter is 1001, expected 0..=1000 (0 means never cancel)"
        );
    }
    assert_eq!(p.terminate_after, 1000);
    p.validate().unwrap();
}

// R7.2: a count given as a float must be a whole number a person could
// mean: 1e15 and past is not an integer, below it the range decides.
#[test]
fn a_count_as_a_float_is_whole_and_below_1e15() {
    let mut p = Profile::default();
    let err = p
        .set("terminate-after", OptionValue::Float(1e15))
        .unwrap_err();
    assert!(err.to_string().contains("is not an integer"), "{err}");
    let err = p
        .set("terminate-after", OptionValue::Float(1e14))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("is 100000000000000, expected 0..=1000"),
        "{err}"
    );
    p.set("terminate-after", OptionValue::Float(3.0)).unwrap();
    assert_eq!(p.terminate_after, 3);
}

// R10.6: a door that spells the key its own way gets the problem without
// it: the form's fault, or the range.
#[test]
fn a_profile_error_states_its_problem_without_the_key() {
    let mut p = Profile::default();
    let form = p.set("idle", OptionValue::from("soon")).unwrap_err();
    let problem = form.problem();
    assert!(problem.contains(", expected "), "{problem}");
    assert!(!problem.contains("idle"), "{problem}");
    let range = p
        .set("terminate-after", OptionValue::from(1001))
        .unwrap_err();
    assert_eq!(
        range.problem(),
        "1001 is out of range, expected 0..=1000 (0 means never cancel)"
    );
}

// R10.6: an unknown signal kind in a list is named, with the kinds there
// are. (Mutant: `delete field expected` at the kinds' error in
// `OptionSpec::parse`, which gave the generic "a list of ..." instead.)
#[test]
fn an_unknown_signal_kind_is_named_with_the_known_ones() {
    let mut p = Profile::default();
    let err = p
        .set("renewed-by", vec!["output", "telepathy"])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "renewed-by: unknown signal kind `telepathy`, expected one of argument-delta, \
         output, tool-call, progress, heartbeat, cpu, net, custom, repeat"
    );
}

// ---------------------------------------------------------------------------
// The option table
// ---------------------------------------------------------------------------

// R10.6: the option table says which keys take a duration (a bare number
// is then milliseconds), shows each value as `stallwarden check` prints it,
// and a parsed setting knows its key.
#[test]
fn the_option_table_knows_durations_shows_values_and_names_settings() {
    use watchdog_core::{OptionSpec, OPTIONS};
    let durations: Vec<&str> = OPTIONS
        .iter()
        .filter(|o| o.takes_duration())
        .map(|o| o.name())
        .collect();
    assert_eq!(
        durations,
        [
            "idle",
            "execution",
            "startup",
            "deadline",
            "max-deadline",
            "liveness",
            "grace-period",
            "heartbeat-interval",
            "long-running-after"
        ]
    );
    let p = Profile::default().idle(secs(90));
    let shown: Vec<String> = [
        "idle",
        "deadline",
        "grace-period",
        "terminate-after",
        "notify-only",
        "renewed-by",
    ]
    .iter()
    .map(|k| OptionSpec::find(k).unwrap().show(&p))
    .collect();
    assert_eq!(
        shown,
        [
            "1m 30s",
            "off",
            "10s",
            "1",
            "false",
            "argument-delta,output,tool-call,progress"
        ]
    );
    let spec = OptionSpec::find("grace-period").unwrap();
    let setting = spec.parse("grace_period", OptionValue::from("3s")).unwrap();
    assert_eq!(setting.key(), "grace-period");
}
