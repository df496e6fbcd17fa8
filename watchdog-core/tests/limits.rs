//! The core's duration limit (R8.12, R10.6) through the engine's API, in
//! virtual time.

use std::time::Duration;

use watchdog_core::{Guard, GuardError, ManualClock, Profile, RecordingSink, MAX_DURATION};

// R8.12, R2.9, R8.7: an extension past 100 years is refused with an event,
// never saturated into a deadline centuries away: the deadline holds.
#[test]
fn an_extension_past_100_years_is_refused_said_and_the_deadline_holds() {
    let events = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(events.clone())
        .build();
    let profile = Profile::default()
        .idle(Duration::from_secs(3600))
        .deadline(Duration::from_secs(60))
        .heartbeat_interval(None);
    let t = guard.start("t", profile).unwrap();
    let err = t.extend(Duration::from_micros(u64::MAX)).unwrap_err();
    assert!(matches!(err, GuardError::ExtensionTooLong { .. }), "{err}");
    assert!(err.to_string().contains("at most 100 years"), "{err}");
    // The limit itself is still accepted.
    assert!(t.extend(MAX_DURATION).is_ok());
    let t2 = guard
        .start(
            "u",
            Profile::default()
                .idle(Duration::from_secs(3600))
                .deadline(Duration::from_secs(60))
                .heartbeat_interval(None),
        )
        .unwrap();
    let _ = t2.extend(Duration::MAX);
    guard.advance(Duration::from_secs(61));
    assert_eq!(
        events.types_for("u"),
        [
            "started",
            "extension_refused",
            "deadline_exceeded",
            "cancelling"
        ]
    );
    t.finish_completed();
    t2.finish_completed();
}
