//! A command stallwarden may not stop (R8.16): its kill refused (EPERM: a
//! setuid program that made itself root, a process of another user) is
//! said in plain words, and stallwarden gives up once the SIGKILL after
//! the grace period is refused too, instead of waiting with no bound for
//! a command that exits only when it likes. It then exits 137, as GNU
//! `timeout -k` does when its own SIGKILL fails to end the command (it
//! kills itself with its group).

use std::time::Duration;

use stallwarden::sinks::process::{GroupSignal, KillOutcome, KillReport, ProcessSink};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// 137: stallwarden gave up on a command it may not kill (128 + SIGKILL,
/// as under GNU `timeout -k`).
pub(crate) const EXIT_GAVE_UP: u8 = 137;

/// How long one wait of the watching thread lasts before it looks again.
const LOOK_AGAIN: Duration = Duration::from_secs(3600);

/// Kill reports the process sink could not carry out, as they come.
pub(crate) struct Refusals {
    rx: UnboundedReceiver<KillReport>,
}

impl Refusals {
    /// Watches `procs` on a thread of its own for a signal that could not
    /// be sent: the SIGTERM, then the SIGKILL. Without a thread, no
    /// refusal is ever reported (the run then waits as before).
    pub(crate) fn watch(procs: ProcessSink) -> Refusals {
        let (tx, rx) = unbounded_channel();
        let spawned = std::thread::Builder::new()
            .name("stallwarden-refusals".into())
            .spawn(move || {
                for signal in [GroupSignal::Term, GroupSignal::Kill] {
                    let failed = |r: &KillReport| {
                        r.signal == signal && matches!(r.outcome, KillOutcome::Failed { .. })
                    };
                    let report = loop {
                        if let Some(r) = procs.wait_for(failed, LOOK_AGAIN) {
                            break r;
                        }
                    };
                    if tx.send(report).is_err() {
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no thread to watch for refused kills");
        }
        Refusals { rx }
    }

    /// The next refused signal; never resolves when none comes.
    pub(crate) async fn recv(&mut self) -> KillReport {
        match self.rx.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }
}

/// The plain line for a refused signal; `gave_up` for the SIGKILL.
pub(crate) fn line(report: &KillReport, grace: Duration) -> String {
    let error = match &report.outcome {
        KillOutcome::Failed { error } => error.as_str(),
        _ => "failed",
    };
    let who = if error == nix::errno::Errno::EPERM.desc() {
        " (it runs as a user stallwarden may not signal)"
    } else {
        ""
    };
    let head = format!(
        "stallwarden: cannot stop the command: {} to its process group {} was refused: {error}{who}",
        report.signal.as_str(),
        report.pgid
    );
    match report.signal {
        GroupSignal::Term => format!(
            "{head}; SIGKILL follows in {}",
            humantime::format_duration(grace)
        ),
        GroupSignal::Kill => {
            format!("{head}; giving up: it runs on unwatched, exiting {EXIT_GAVE_UP}")
        }
    }
}
