//! Nothing silent (R8.7): stallwarden's own `tracing` output goes to stderr.
//! At the default verbosity only errors show (what changes the outcome has
//! its own plain line); `-v` adds what the engine, sources and sinks count
//! or refuse (warnings, info and debug: a failing sink, coalesced
//! heartbeats, each malformed datagram or refused stream event), and `-vv`
//! trace. `RUST_LOG`, when set, wins over both, with the usual
//! `tracing-subscriber` directive syntax.

use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber for verbosity `verbose` (the count of
/// `-v`). A second call, or a `RUST_LOG` that does not parse, leaves a
/// working default rather than failing the run.
pub(crate) fn init(verbose: u8) {
    let level = match verbose {
        // R8.16: what the process sink could not do is said in plain
        // words by `run` (src/cli/refused.rs, the aftermath), not as raw
        // log lines.
        0 => "error,stallwarden_sinks::process=off",
        1 => "debug",
        _ => "trace",
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| match EnvFilter::try_new(&v) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("stallwarden: RUST_LOG={v} ignored: {e}");
                None
            }
        })
        .unwrap_or_else(|| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// Logs what the task's sources refused over the run, by key (R8.7,
/// R10.6): one warning under `-v` (`inputs refused: notify.bad_value 2,
/// tools.unknown_call 1`), the same counts `describe` shows, so a client
/// that speaks a protocol wrong is seen whichever source it fed.
pub(crate) fn refused_summary(status: Option<&stallwarden::TaskStatus>) {
    let Some(refused) = status.map(|s| &s.refused).filter(|r| !r.is_empty()) else {
        return;
    };
    let counts: Vec<String> = refused.iter().map(|(k, n)| format!("{k} {n}")).collect();
    tracing::warn!(
        total = refused.values().sum::<u64>(),
        "inputs refused: {}",
        counts.join(", ")
    );
}

/// Logs what the notify socket counted over the run (R8.7): at info (`-v`)
/// as a summary, at warn when some datagrams were malformed (by reason in
/// [`refused_summary`]), so a client that speaks the protocol wrong is seen
/// under `-v`.
pub(crate) fn notify_summary(socket: Option<&stallwarden::sources::notify::NotifySocket>) {
    let Some((stats, malformed)) = socket.map(|s| (s.stats(), s.malformed())) else {
        return;
    };
    if malformed > 0 {
        tracing::warn!(
            datagrams = stats.datagrams,
            malformed,
            "notify socket: malformed datagrams ignored"
        );
    } else if stats.datagrams > 0 {
        tracing::info!(
            datagrams = stats.datagrams,
            heartbeats = stats.heartbeats,
            extensions = stats.extensions,
            extensions_refused = stats.extensions_refused,
            "notify socket: datagrams received"
        );
    }
}
