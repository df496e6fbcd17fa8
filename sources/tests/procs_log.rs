//! What the process sampler logs (R5.5), in a test binary of its own: the
//! sampler warns from its own thread, so the test needs the process-wide
//! subscriber, which in `procs.rs` would also catch the same warning from
//! the other samplers of an unreadable table that run beside it.

mod common;

use common::Captured;

use std::time::Duration;

use stallwarden_sources::procs::{ProcTable, ProcessSampler};

// R5.5: "a sampler that cannot read the table logs once": three failed
// samples (the thread's own and two on request) give exactly one warning
// (kills the deleted `!` on the sampler's `warned` flag, which stayed
// silent on the first failure and warned on every later one).
#[test]
fn an_unreadable_table_is_warned_about_exactly_once() {
    let captured = Captured::default();
    let subscriber = captured.warnings();
    // Process-wide, so the sampler's own thread is captured as well.
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let sampler = ProcessSampler::with_table(
        ProcTable::at("/nonexistent/proc"),
        1,
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    assert_eq!(sampler.sample_now(), None);
    assert_eq!(sampler.sample_now(), None);
    drop(sampler); // joins the thread, which sampled once before waiting
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        text.matches("process sampler cannot read").count(),
        1,
        "{text}"
    );
}
