//! Signal kinds (R2.6): each kind's kebab-case name and slot, the kind
//! sets that say what renews a budget, and a recorder that answers which
//! kinds renew its task.
//!
//! Pure values, and one guard on a virtual clock (`ManualClock`) that is
//! never advanced.

use watchdog_core::{Guard, KindSet, ManualClock, Profile, SignalKind};

// R2.6: every kind round-trips through its kebab-case name and has its own
// slot; an unknown name is an error listing the kinds.
#[test]
fn signal_kinds_round_trip_through_their_names() {
    let names = [
        "argument-delta",
        "output",
        "tool-call",
        "progress",
        "heartbeat",
        "cpu",
        "net",
        "custom",
        "repeat",
    ];
    for (i, (kind, name)) in SignalKind::ALL.into_iter().zip(names).enumerate() {
        assert_eq!(kind.as_str(), name);
        assert_eq!(kind.to_string(), name);
        assert_eq!(name.parse::<SignalKind>(), Ok(kind));
        assert_eq!(kind.slot(), i);
        assert_eq!(serde_json::to_value(kind).unwrap(), name);
    }
    assert_eq!(SignalKind::COUNT, SignalKind::ALL.len());
    let err = "stdout".parse::<SignalKind>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown signal kind `stdout`, expected one of argument-delta, output, tool-call, progress, heartbeat, cpu, net, custom, repeat"
    );
}

// R2.6: a kind set holds exactly the kinds put in it.
#[test]
fn kind_sets_hold_exactly_their_kinds() {
    let d = KindSet::DEFAULT_RENEWING;
    let held: Vec<_> = d.iter().collect();
    assert_eq!(
        held,
        [
            SignalKind::ArgumentDelta,
            SignalKind::Output,
            SignalKind::ToolCall,
            SignalKind::Progress
        ]
    );
    assert_eq!(KindSet::EMPTY.iter().count(), 0);
    assert_eq!(KindSet::default(), KindSet::EMPTY);
    for k in SignalKind::ALL {
        let one = KindSet::EMPTY.with(k);
        assert_eq!(one.iter().collect::<Vec<_>>(), [k]);
        for other in SignalKind::ALL {
            assert_eq!(one.contains(other), other == k, "{k} vs {other}");
        }
    }
    let built: KindSet = [SignalKind::Cpu, SignalKind::Heartbeat, SignalKind::Cpu]
        .into_iter()
        .collect();
    assert_eq!(
        built,
        KindSet::EMPTY
            .with(SignalKind::Heartbeat)
            .with(SignalKind::Cpu)
    );
    assert_eq!(format!("{built:?}"), "{Heartbeat, Cpu}");
    assert_eq!(
        serde_json::to_value(built).unwrap(),
        serde_json::json!(["heartbeat", "cpu"])
    );
}

// R2.6: a recorder says which kinds renew its task's budgets.
#[test]
fn a_recorder_says_which_kinds_renew() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let net = KindSet::DEFAULT_RENEWING.with(SignalKind::Net);
    let task = guard
        .start("dl", Profile::default().renewed_by(net))
        .unwrap();
    assert!(task.recorder().renews(SignalKind::Net));
    assert!(task.recorder().renews(SignalKind::Output));
    assert!(!task.recorder().renews(SignalKind::Cpu));
}
