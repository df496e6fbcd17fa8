//! Config loading and its errors (SPEC §7): one table row per kind of
//! mistake, each asserted by substring on the rendered message (R7.2).

use std::time::Duration;

use stallwarden::config::{builtin, Config, ConfigErrorKind, DEFAULT_TOML};
use stallwarden::{KindSet, Profile, SignalKind};

/// R7.1: the shipped default file is the built-in profile.
#[test]
fn shipped_default_file_equals_the_core_defaults() {
    assert_eq!(*builtin(), Profile::default());
    let config = Config::from_str(DEFAULT_TOML, "stallwarden.default.toml").unwrap();
    assert_eq!(config.profile(None).unwrap(), Profile::default());
    assert!(config.profile_names().is_empty());
}

/// R7.1: profiles override [defaults] key by key; [defaults] overrides the
/// built-in values; kebab-case keys, humantime durations and "off".
#[test]
fn profiles_override_defaults_key_by_key() {
    let text = r#"
[defaults]
idle = "90s"
grace-period = "2s"

[profile.ci]
idle = "1h 30m"
execution = "10m"
deadline = "2h"
max-deadline = "3h"
liveness = "45s"
renewed-by = ["output", "heartbeat"]
terminate-after = 3
heartbeat-interval = "off"
long-running-after = "3s"
notify-only = true

[profile.quiet]
idle = "off"
heartbeat-interval = "0s"
"#;
    let config = Config::from_str(text, "stallwarden.toml").unwrap();
    assert_eq!(config.profile_names(), ["ci", "quiet"]);

    let defaults = config.profile(None).unwrap();
    assert_eq!(defaults.idle, Some(Duration::from_secs(90)));
    assert_eq!(defaults.grace_period, Duration::from_secs(2));
    assert_eq!(
        defaults.terminate_after, 1,
        "untouched keys keep the built-in value"
    );

    let ci = config.profile(Some("ci")).unwrap();
    assert_eq!(ci.idle, Some(Duration::from_secs(5400)));
    assert_eq!(ci.execution, Some(Duration::from_secs(600)));
    assert_eq!(ci.deadline, Some(Duration::from_secs(7200)));
    assert_eq!(ci.max_deadline, Some(Duration::from_secs(10800)));
    assert_eq!(ci.liveness, Some(Duration::from_secs(45)));
    assert_eq!(
        ci.renewed_by,
        KindSet::EMPTY
            .with(SignalKind::Output)
            .with(SignalKind::Heartbeat)
    );
    assert_eq!(ci.terminate_after, 3);
    assert_eq!(
        ci.grace_period,
        Duration::from_secs(2),
        "inherited from [defaults]"
    );
    assert_eq!(ci.heartbeat_interval, None);
    assert_eq!(ci.long_running_after, Some(Duration::from_secs(3)));
    assert!(ci.notify_only);

    let quiet = config.profile(Some("quiet")).unwrap();
    assert_eq!(quiet.idle, None);
    assert_eq!(
        quiet.heartbeat_interval, None,
        "R3.7: 0 disables heartbeats"
    );
}

#[test]
fn an_empty_file_is_the_built_in_defaults() {
    let config = Config::from_str("", "empty.toml").unwrap();
    assert_eq!(config.profile(None).unwrap(), Profile::default());
}

/// R7.2: every kind of mistake, with the pieces its message must carry.
#[test]
fn every_mistake_names_file_line_key_and_expectation() {
    let rows: &[(&str, &str, &[&str])] = &[
        // R8.15, R8.14: the keys of issue 44.
        (
            "unknown restart policy",
            "[defaults]\nrestart = \"always\"\n",
            &[
                "bad.toml:2:11",
                "defaults.restart",
                "unknown variant `always`, expected `no` or `on-stall`",
            ],
        ),
        (
            "negative max-restarts",
            "[defaults]\nmax-restarts = -1\n",
            &["bad.toml:2:16", "defaults.max-restarts", "integer `-1`"],
        ),
        (
            "bad restart delay",
            "[profile.worker]\nrestart-delay = \"soon\"\n",
            &[
                "bad.toml:2:17",
                "profile.worker.restart-delay",
                "expected a duration such as",
            ],
        ),
        (
            "stacks not a boolean",
            "[defaults]\nstacks = \"yes\"\n",
            &["bad.toml:2:10", "defaults.stacks", "expected a boolean"],
        ),
        (
            "on-stall not a string",
            "[defaults]\non-stall = 3\n",
            &["bad.toml:2:12", "defaults.on-stall", "expected a string"],
        ),
        (
            "unknown key",
            "[profile.ci]\nidel = \"5s\"\n",
            &[
                "bad.toml:2:1",
                "profile.ci",
                "unknown key `idel`",
                "did you mean `idle`?",
            ],
        ),
        (
            "bad duration",
            "[profile.ci]\nidle = \"5 minuets\"\n",
            &[
                "bad.toml:2:8",
                "profile.ci.idle",
                "invalid duration \"5 minuets\"",
                "expected a duration such as \"90s\"",
            ],
        ),
        (
            "wrong type",
            "[defaults]\nnotify-only = \"yes\"\n",
            &[
                "bad.toml:2:15",
                "defaults.notify-only",
                "expected a boolean",
            ],
        ),
        (
            "bare number as duration",
            "[defaults]\ngrace-period = 10\n",
            &[
                "bad.toml:2:16",
                "defaults.grace-period",
                "expected a duration such as",
            ],
        ),
        (
            "out of range",
            "[defaults]\n\n[profile.ci]\nidle = \"40days\"\n",
            &[
                "bad.toml:4:8",
                "profile.ci.idle is 40days, expected 1ms..=30days",
            ],
        ),
        (
            "heartbeat-interval 10ms",
            "[profile.fast]\nheartbeat-interval = \"10ms\"\n",
            &[
                "bad.toml:2:22",
                "profile.fast.heartbeat-interval is 10ms",
                "\"off\" or 1s..=1h",
            ],
        ),
        (
            "negative terminate-after",
            "[defaults]\nterminate-after = -1\n",
            &[
                "bad.toml:2:19",
                // R10.6: the same form as any value out of range.
                "defaults.terminate-after is -1, expected 0..=1000",
            ],
        ),
        (
            "terminate-after past its range",
            "[defaults]\nterminate-after = 5000\n",
            &[
                "bad.toml:2:19",
                "defaults.terminate-after is 5000",
                "0..=1000",
            ],
        ),
        (
            "typo'd table name",
            "[profiles.ci]\nidle = \"5s\"\n",
            &[
                "bad.toml:1:2",
                "unknown table `profiles`",
                "did you mean `profile`?",
                "[defaults] or [profile.NAME]",
            ],
        ),
        (
            "unknown signal kind",
            "[defaults]\nrenewed-by = [\"output\", \"bytes\"]\n",
            &[
                "bad.toml:2",
                "defaults.renewed-by",
                "unknown signal kind `bytes`",
                "heartbeat",
            ],
        ),
        (
            "deadline beyond max-deadline, mixed across tables",
            "[defaults]\nmax-deadline = \"1h\"\n[profile.long]\ndeadline = \"2h\"\n",
            &[
                "bad.toml:4:12",
                "profile.long.deadline is 2h, expected at most max-deadline",
            ],
        ),
        (
            "zero idle budget",
            "[defaults]\nidle = \"0s\"\n",
            &["bad.toml:2:8", "defaults.idle is 0s", "1ms..=30days"],
        ),
        (
            "not TOML",
            "[defaults\nidle = 1\n",
            &["bad.toml:1:", "invalid TOML"],
        ),
    ];
    for (what, text, wants) in rows {
        let err = match Config::from_str(text, "bad.toml") {
            Ok(_) => panic!("{what}: accepted {text:?}"),
            Err(e) => e.to_string(),
        };
        for want in *wants {
            assert!(
                err.contains(want),
                "{what}: {err:?} does not contain {want:?}"
            );
        }
        assert!(!err.contains('\n'), "{what}: one line expected: {err:?}");
        assert!(
            !err.contains("$__"),
            "{what}: serde internals leaked: {err:?}"
        );
    }
}

/// R7.1: a task picks a profile by name; an unknown one lists the known.
#[test]
fn unknown_profile_lists_the_known_ones() {
    let config = Config::from_str("[profile.ci]\n[profile.nightly]\n", "stallwarden.toml").unwrap();
    let err = config.profile(Some("nigthly")).unwrap_err();
    assert!(matches!(err.kind(), ConfigErrorKind::UnknownProfile { .. }));
    let msg = err.to_string();
    for want in [
        "stallwarden.toml",
        "unknown profile `nigthly`",
        "did you mean `nightly`?",
        "known profiles: ci, nightly",
    ] {
        assert!(msg.contains(want), "{msg:?} does not contain {want:?}");
    }
    let none = Config::default()
        .profile(Some("ci"))
        .unwrap_err()
        .to_string();
    assert!(
        none.contains("no [profile.NAME] tables are defined"),
        "{none}"
    );
}

#[test]
fn missing_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let err = Config::load(&path).unwrap_err();
    assert!(matches!(err.kind(), ConfigErrorKind::Read(_)));
    let msg = err.to_string();
    assert!(msg.contains("absent.toml"), "{msg}");
    assert!(msg.contains("cannot read config"), "{msg}");
}

#[test]
fn load_reads_a_real_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stallwarden.toml");
    std::fs::write(&path, "[profile.ci]\nidle = \"2s\"\n").unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(
        config.profile(Some("ci")).unwrap().idle,
        Some(Duration::from_secs(2))
    );
    let err = {
        std::fs::write(&path, "[profile.ci]\nidle = \"2 s\"\nidle = \"3s\"\n").unwrap();
        Config::load(&path).unwrap_err().to_string()
    };
    assert!(
        err.contains("stallwarden.toml:3"),
        "duplicate key located: {err}"
    );
}
