//! Outbound heartbeats (R3.7, with R2.8 and R5.1): what a heartbeat reports
//! while paused, the intervals it skips for a renewal, and the output totals
//! it adds up. Virtual time (`ManualClock` + `Guard::advance`), never a real
//! sleep.

use watchdog_core::{EventKind, Profile};

mod common;
use common::{secs, setup};

// R3.7, R2.8: a heartbeat emitted while paused reports the budget left at
// the pause, and the deadline in active time.
#[test]
fn heartbeat_while_paused_reports_budget_left_at_the_pause() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "h",
            Profile::default()
                .idle(secs(60))
                .deadline(secs(100))
                .heartbeat_interval(Some(secs(10))),
        )
        .unwrap();
    guard.advance(secs(5));
    t.pause().unwrap();
    guard.advance(secs(20)); // heartbeats at 10 s and 20 s
    t.resume().unwrap(); // at 25 s: 20 s paused
    guard.advance(secs(5)); // heartbeat at 30 s
    let hbs: Vec<_> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Heartbeat {
                idle_remaining,
                deadline,
                ..
            } => Some((e.elapsed, idle_remaining, deadline)),
            _ => None,
        })
        .collect();
    assert_eq!(
        hbs,
        [
            (secs(10), Some(secs(55)), Some(secs(100))),
            (secs(20), Some(secs(55)), Some(secs(100))),
            (secs(30), Some(secs(50)), Some(secs(100))),
        ]
    );
}

// R3.7: no heartbeat for an interval with a renewal in it, even one renewal
// in the middle; heartbeats resume once a whole interval is silent. With
// no idle budget the heartbeat says so (absent).
#[test]
fn heartbeat_skipped_for_any_interval_with_a_renewal() {
    let (guard, rec, _) = setup();
    let mut p = Profile::default().heartbeat_interval(Some(secs(10)));
    p.idle = None;
    let t = guard.start("hb", p).unwrap();
    guard.advance(secs(15));
    t.output(7, 1); // renews inside (10 s, 20 s]
    guard.advance(secs(15)); // 30 s
    let hbs: Vec<_> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Heartbeat {
                idle_remaining,
                total_bytes,
                total_lines,
                last_output_age,
                ..
            } => Some((
                e.elapsed,
                idle_remaining,
                total_bytes,
                total_lines,
                last_output_age,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        hbs,
        [
            (secs(10), None, 0, 0, None),
            (secs(30), None, 7, 1, Some(secs(15)))
        ]
    );
}

// R3.7, R5.1: output counters feed the heartbeat's totals along with
// `Recorder::output`.
#[test]
fn heartbeat_totals_add_every_output_counter() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "oc",
            Profile::default()
                .idle(secs(600))
                .heartbeat_interval(Some(secs(10))),
        )
        .unwrap();
    let out = t.output_counter();
    let err = t.output_counter();
    out.record(100, 3);
    err.record(20, 0);
    t.output(1, 1);
    assert_eq!(out.recorder().id(), t.id());
    guard.advance(secs(10));
    let hb = rec
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::Heartbeat {
                total_bytes,
                total_lines,
                ..
            } => Some((total_bytes, total_lines)),
            _ => None,
        })
        .unwrap();
    assert_eq!(hb, (121, 4));
    let s = t.status().unwrap();
    assert_eq!((s.total_bytes, s.total_lines), (121, 4));
    assert_eq!(s.last_output_age, Some(secs(10)));
}
