//! Profiles as values: every range inclusive at both ends and one step
//! past it refused with the key and the range (R7.2), the effective
//! execution and startup budgets falling back to idle (R2.2, R2.3), and a
//! profile serialized like the config file (R7.1). Setting options by key,
//! from every door, is `options.rs`.
//!
//! Pure values: no guard, no clock.

use std::time::Duration;

use watchdog_core::Profile;

mod common;
use common::{ms, secs};

// R7.2: the ends of every range are allowed; one step past them is refused
// with the key and the range.
#[test]
fn profile_ranges_are_inclusive_at_both_ends() {
    let ok = |p: Profile| p.validate().map_err(|e| e.to_string());
    let base = Profile::default;
    assert_eq!(ok(base().idle(ms(1))), Ok(()));
    assert_eq!(ok(base().idle(secs(30 * 86_400))), Ok(()));
    assert_eq!(ok(base().liveness(ms(1))), Ok(()));
    assert_eq!(ok(base().deadline(secs(365 * 86_400))), Ok(()));
    assert_eq!(ok(base().max_deadline(secs(365 * 86_400))), Ok(()));
    assert_eq!(ok(base().grace_period(Duration::ZERO)), Ok(()));
    assert_eq!(ok(base().grace_period(secs(3600))), Ok(()));
    assert_eq!(ok(base().heartbeat_interval(Some(secs(1)))), Ok(()));
    assert_eq!(ok(base().heartbeat_interval(Some(secs(3600)))), Ok(()));
    assert_eq!(ok(base().heartbeat_interval(None)), Ok(()));
    assert_eq!(ok(base().terminate_after(1000)), Ok(()));
    assert_eq!(ok(base().terminate_after(0)), Ok(()));
    assert_eq!(ok(base().deadline(secs(60)).max_deadline(secs(60))), Ok(()));

    let err = |p: Profile| p.validate().unwrap_err().to_string();
    assert_eq!(
        err(base().idle(Duration::from_micros(999))),
        "idle is 999us, expected 1ms..=30days"
    );
    assert_eq!(
        err(base().startup(secs(30 * 86_400) + ms(1))),
        "startup is 30days 1ms, expected 1ms..=30days"
    );
    assert_eq!(
        err(base().long_running_after(Duration::ZERO)),
        "long-running-after is 0s, expected 1ms..=30days"
    );
    assert_eq!(
        err(base().max_deadline(secs(365 * 86_400) + ms(1))),
        "max-deadline is 11months 30days 3h 50m 24s 1ms, expected 1ms..=365days"
    );
    assert_eq!(
        err(base().grace_period(secs(3600) + ms(1))),
        "grace-period is 1h 1ms, expected 0s..=1h"
    );
    assert_eq!(
        err(base().heartbeat_interval(Some(ms(999)))),
        "heartbeat-interval is 999ms, expected \"off\" or 1s..=1h"
    );
    assert_eq!(
        err(base().terminate_after(1001)),
        "terminate-after is 1001, expected 0..=1000 (0 means never cancel)"
    );
    assert_eq!(
        err(base().deadline(secs(61)).max_deadline(secs(60))),
        "deadline is 1m 1s, expected at most max-deadline"
    );
}

// R2.2, R2.3: the effective execution and startup budgets.
#[test]
fn effective_budgets_fall_back_to_idle() {
    let p = Profile {
        idle: None,
        ..Profile::default()
    };
    assert_eq!(p.execution_budget(), None);
    assert_eq!(p.startup_budget(), None);
    assert_eq!(p.idle_budget(), None);
    let p = p.execution(secs(7));
    assert_eq!(p.execution_budget(), Some(secs(7)));
    let p = p.idle(secs(9));
    assert_eq!(p.execution_budget(), Some(secs(9)));
    assert_eq!(p.idle_budget(), Some(secs(9)));
    assert_eq!(p.clone().startup(secs(2)).startup_budget(), Some(secs(2)));
    assert_eq!(p.startup_budget(), Some(secs(9)));
}

// R7.1: a profile serializes with kebab-case keys, humantime durations and
// "off" for a disabled budget, like the shipped default config.
#[test]
fn profile_serializes_like_the_config_file() {
    let json = serde_json::to_value(
        Profile::default()
            .deadline(secs(5400))
            .long_running_after(secs(3)),
    )
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "idle": "5m",
            "execution": "off",
            "startup": "off",
            "deadline": "1h 30m",
            "max-deadline": "off",
            "liveness": "off",
            "renewed-by": ["argument-delta", "output", "tool-call", "progress"],
            "terminate-after": 1,
            "grace-period": "10s",
            "heartbeat-interval": "10s",
            "long-running-after": "3s",
            "notify-only": false
        })
    );
}
